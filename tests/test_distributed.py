"""The eager twin under ``tf.distribute`` (eager/distributed.py, pgtwin/train/distributed.py)
and rollouts stepped in worker processes.

The oracle of every distributed update is the single-device ``eager.agent.ReinforceAgent``
fed the concatenation of the replicas' batches: R replicas must make the update one device
makes on the global batch (same gradient, same weights after several optimizer steps), up
to the order of float summation.

TensorFlow fixes its device list when it first initialises, so the two-logical-device runs
and the two-worker runs happen in subprocesses (this file run as a script: ``python -m
tests.test_distributed logical-devices``), each bounded by a timeout.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect
from pgtwin_core.specs import PolicySpec, init_weights, spec_for_env
from pgtwin.train.distributed import (
    check_tf_config, concat_batches, make_strategy, replica_env_seed, replica_rng,
)

ROOT = Path(__file__).resolve().parents[1]

# Cases of the two-device parity run: SGD shows a gradient counted twice (Adam would hide a
# constant factor); unequal valid counts per replica show a per-replica normalisation or
# mean; clipping needs the global norm. (optimal_scalar: see _optimal_scalar_case.)
PARITY_CASES = {
    "adam-mean-clip": dict(optimizer="adam", baseline="mean", max_grad_norm=0.05),
    "sgd-raw-mean-entropy": dict(optimizer="sgd", normalize_returns=False, baseline="mean",
                                 entropy_coef=0.01),
}
# The episodic baselines (float64): entropy bonus, clipping and raw returns each once.
EPISODIC_CASES = {
    "optimal_scalar_episodic": dict(entropy_coef=0.01),
    "optimal_per_param": dict(max_grad_norm=0.05),  # the norms are ~0.06-0.07: clipped
    "optimal_time": dict(normalize_returns=False, entropy_coef=0.01),
}
# float32: sums over 230 samples in another order (~1e-7 relative); Adam divides by
# sqrt(v) and amplifies that on near-zero gradients.
TOL = {"float32": dict(grad=1e-6, weight=2e-5, loss=1e-6),
       "float64": dict(grad=1e-14, weight=1e-13, loss=1e-14)}


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    env.pop("TF_CONFIG", None)
    return env


def _last_json_line(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------- rollouts in worker processes
def _linear_policy(spec: PolicySpec):
    """A fixed numpy policy (logits = obs @ W), so both rollouts see the same actions."""
    w = np.random.default_rng(7).normal(size=(spec.obs_dim, spec.action_size))
    return lambda obs: obs.reshape(obs.shape[0], -1) @ w


def test_async_collect_replays_sync_collect():
    # Sub-env i is seeded seed + i in both modes, so stepping the copies in worker processes
    # must give the same batch, bit for bit, as stepping them here.
    batches = {}
    for mode in ("sync", "async"):
        envs = make_vec_env("CartPole-v1", 3, seed=5, vectorization=mode)
        spec = spec_for_env(envs)
        try:
            kind = type(envs.unwrapped).__name__
            assert kind == {"sync": "SyncVectorEnv", "async": "AsyncVectorEnv"}[mode]
            rng, state, out = np.random.default_rng(0), None, []
            for _ in range(2):  # the second collect continues the first (state, autoresets)
                batch, state = collect(envs, _linear_policy(spec), spec, 40, rng, state)
                out.append(batch)
        finally:
            envs.close()
        batches[mode] = out
    for sync, asyn in zip(batches["sync"], batches["async"]):
        assert (~sync.valid).any()  # episodes ended and autoreset inside the window
        for name in ("obs", "actions", "rewards", "terminated", "truncated", "valid",
                     "next_obs", "episode_returns", "episode_lengths"):
            np.testing.assert_array_equal(getattr(sync, name), getattr(asyn, name), err_msg=name)
        assert sync.env_steps == asyn.env_steps


def test_parallel_collection_replays_sequential_collection():
    # A thread per replica, each with its own env, generator and state: the batches (and
    # the states they continue from) must be those of collecting one replica after another.
    from pgtwin_core.parallel_rollout import ReplicaCollector

    spec = spec_for_env(make_vec_env("CartPole-v1", 1))
    out = {}
    for mode in ("sequential", "parallel"):
        envs = [make_vec_env("CartPole-v1", 3, seed=replica_env_seed(4, r, 3)) for r in range(3)]
        rngs = [replica_rng(4, r) for r in range(3)]
        collector, states, batches = ReplicaCollector(envs, mode), [None] * 3, []
        try:
            for _ in range(2):
                got, states = collector.collect(_linear_policy(spec), spec, 40, rngs, states)
                batches.append(got)
        finally:
            collector.close()
            for env in envs:
                env.close()
        out[mode] = batches
    assert sum(b.episode_returns.size for batches in out["parallel"] for b in batches) > 0
    for seq, par in zip(out["sequential"], out["parallel"]):
        for r, (a, b) in enumerate(zip(seq, par)):
            for name in ("obs", "actions", "rewards", "terminated", "truncated", "valid",
                         "episode_returns", "episode_lengths"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name),
                                              err_msg=f"replica {r} {name}")
    assert not np.array_equal(out["parallel"][0][0].obs, out["parallel"][0][1].obs)
    with pytest.raises(ValueError, match="unknown collection 'async'"):
        ReplicaCollector([], "async")


def test_checkpoint_agreement_takes_the_newest_update_every_worker_has():
    # Each worker (a thread here) calls agree() with its own verified updates; gather is a
    # lock-step exchange, as the collective is. Oracle: the newest update in every set.
    import threading

    from pgtwin.train.checkpoint_shards import agree

    cases = [[{3, 6}, {3, 6}, {3, 6}], [{3, 6}, {3}, {3, 6}], [{6, 9}, {3, 6}, {9}],
             [{2, 4, 6}, {4, 6}, {1, 4, 7}], [{5}], [set(), {1}]]
    for sets in cases:
        common = set.intersection(*sets)
        want = max(common) if common else None
        barrier, slots, got = threading.Barrier(len(sets)), [None] * len(sets), {}

        def gather(me, x):
            slots[me] = x
            barrier.wait()
            seen = list(slots)
            barrier.wait()
            return seen

        threads = [threading.Thread(target=lambda me=me: got.__setitem__(
            me, agree(sets[me], lambda x: gather(me, x)))) for me in range(len(sets))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert got == {me: want for me in range(len(sets))}, sets


# --------------------------------------------------------------------- pure helpers
def test_replica_seeds_cover_one_global_vector_env():
    # replica r, env i -> seed + r * N + i: two replicas of 3 envs = one vector env of 6.
    seeds = [replica_env_seed(10, r, 3) + i for r in range(2) for i in range(3)]
    assert seeds == [10, 11, 12, 13, 14, 15]
    a, b = replica_rng(0, 0).random(4), replica_rng(0, 1).random(4)
    assert not np.allclose(a, b)


def test_concat_batches_joins_envs_and_refuses_mixed_lengths():
    envs = make_vec_env("CartPole-v1", 2, seed=0)
    spec = spec_for_env(envs)
    policy, rng = _linear_policy(spec), np.random.default_rng(0)
    b1, state = collect(envs, policy, spec, 30, rng)
    b2, _ = collect(envs, policy, spec, 30, rng, state)
    whole = concat_batches([b1, b2])
    assert whole.obs.shape == (30, 4, 4) and whole.valid.shape == (30, 4)
    np.testing.assert_array_equal(whole.rewards[:, 2:], b2.rewards)
    assert whole.num_valid == b1.num_valid + b2.num_valid
    # Episode lengths follow rollout order (step, then env), which segments() checks them
    # against: the joined batch has exactly the complete episodes of its parts.
    from pgtwin_core.baselines import segments
    parts = [segments(b, 0.99).num_episodes for b in (b1, b2)]
    assert segments(whole, 0.99).num_episodes == sum(parts) > 0
    short, _ = collect(envs, policy, spec, 5, rng)
    envs.close()
    with pytest.raises(ValueError, match=r"different lengths T \[5, 30\]"):
        concat_batches([b1, short])
    with pytest.raises(ValueError, match="no batches"):
        concat_batches([])


def test_strategy_and_tf_config_errors():
    with pytest.raises(ValueError, match="unknown strategy 'ring'"):
        make_strategy("ring")
    with pytest.raises(ValueError, match="needs the TF_CONFIG"):
        check_tf_config(None)
    with pytest.raises(ValueError, match="not valid JSON"):
        check_tf_config("{worker")
    with pytest.raises(ValueError, match="no cluster.worker list"):
        check_tf_config('{"cluster": {}, "task": {"type": "worker", "index": 0}}')
    with pytest.raises(ValueError, match=r"index': 0\.\.1"):
        check_tf_config('{"cluster": {"worker": ["a:1", "b:2"]}, '
                        '"task": {"type": "worker", "index": 2}}')
    with pytest.raises(ValueError, match="cpu_replicas must be an integer >= 1, got 0"):
        make_strategy("mirrored", cpu_replicas=0)


@pytest.mark.parametrize("extra, message", [
    (["--cpu-replicas", "2"], "--cpu-replicas needs --strategy mirrored or multi-worker"),
    (["--strategy", "multi-worker"], "strategy 'multi-worker' needs the TF_CONFIG"),
    (["--strategy", "mirrored", "--impl", "graph"], "--strategy needs --impl eager"),
    (["--strategy", "mirrored", "--cpu-replicas", "0"], "--cpu-replicas: must be an integer >= 1"),
    (["--strategy", "multi-worker", "TF_CONFIG"], "--strategy multi-worker needs --logdir"),
    (["--strategy", "mirrored", "--resume", "--logdir", "LOGDIR"],
     "holds no distributed run (no cluster.json); resume it without --strategy"),
    # A distributed run's own options, given to a run that has no strategy (or one worker),
    # used to be accepted and ignored.
    (["--collection", "sequential"], "--collection needs --strategy"),
    (["--worker-timeout", "10"], "--worker-timeout needs --strategy"),
    (["--strategy", "mirrored", "--worker-timeout", "10"],
     "--worker-timeout needs --strategy multi-worker (a mirrored run has one worker"),
])
def test_train_command_strategy_errors(extra, message, capsys, monkeypatch, tmp_path):
    from pgtwin.cli import main
    from pgtwin.train.run import RunSettings, run_paths, write_settings

    monkeypatch.delenv("TF_CONFIG", raising=False)
    if "TF_CONFIG" in extra:
        extra = [x for x in extra if x != "TF_CONFIG"]
        monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1"]}, '
                                        '"task": {"type": "worker", "index": 0}}')
    if "LOGDIR" in extra:  # a single-process run's directory
        logdir = str(tmp_path / "run")
        write_settings(run_paths(logdir), RunSettings("CartPole-v1", "eager", ReinforceConfig(),
                                                      logdir))
        extra = [logdir if x == "LOGDIR" else x for x in extra]
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "CartPole-v1", *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_strategy_drops_a_table_default_it_cannot_run_and_refuses_it_given(capsys, monkeypatch):
    """CartPole-v1's per-env defaults turn obs_norm on, which the distributed loop does not
    run: under --strategy the table's value is dropped with a note (the env stays
    trainable); the same option given on the command line is kept (and refused later)."""
    import argparse

    from pgtwin.cli.commands import train as train_command

    monkeypatch.delenv("TF_CONFIG", raising=False)
    parser = argparse.ArgumentParser(prog="pgtwin")
    train_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--env", "CartPole-v1", "--strategy", "mirrored"])
    settings, _ = train_command.settings_from_args(args, parser)
    assert settings.obs_norm  # the table's default, or this test proves nothing
    kept = train_command._without_table_only_options(args, settings)
    assert not kept.obs_norm and kept.config == settings.config
    assert ("CartPole-v1's default obs_norm=True is not available under --strategy yet; "
            "training without it") in capsys.readouterr().err
    given = parser.parse_args(["train", "--env", "CartPole-v1", "--strategy", "mirrored",
                               "--obs-norm"])
    settings, _ = train_command.settings_from_args(given, parser)
    assert train_command._without_table_only_options(given, settings).obs_norm
    # Pendulum-v1's table gives the value baseline, which the distributed agent refuses.
    args = parser.parse_args(["train", "--env", "Pendulum-v1", "--strategy", "mirrored"])
    settings, _ = train_command.settings_from_args(args, parser)
    assert settings.config.baseline == "value"
    kept = train_command._without_table_only_options(args, settings)
    assert kept.config.baseline == "mean" and not kept.obs_norm
    err = capsys.readouterr().err
    assert "baseline='value' (baseline 'mean' instead)" in err
    # its natural step goes too, and the note says what the run steps with instead
    assert kept.config.natural_kl is None
    assert err.rstrip().endswith(f"training without it (steps of {kept.config.optimizer}, lr "
                                 f"{kept.config.learning_rate:g})"), err


# ----------------------------------------------------------- one replica, in this process
def _cartpole_batches(spec, config, n_batches, seed=0):
    envs = make_vec_env("CartPole-v1", config.num_envs, seed=seed)
    policy, rng, state, out = _linear_policy(spec), np.random.default_rng(seed), None, []
    for _ in range(n_batches):
        batch, state = collect(envs, policy, spec, config.num_steps, rng, state)
        out.append(batch)
    envs.close()
    return out


def test_one_device_mirrored_strategy_matches_the_single_device_agent():
    import tensorflow as tf

    from eager.agent import ReinforceAgent
    from eager.distributed import DistributedReinforceAgent

    config = ReinforceConfig(num_envs=4, num_steps=30, optimizer="sgd", baseline="mean",
                             learning_rate=0.1, dtype="float64")
    spec = spec_for_env(make_vec_env("CartPole-v1", 1))
    weights = init_weights(spec, 3, dtype=config.dtype)
    dist = DistributedReinforceAgent(spec, config, weights=weights,
                                     strategy=tf.distribute.MirroredStrategy(["/cpu:0"]))
    single = ReinforceAgent(spec, config, weights=weights)
    assert dist.replica_ids == (0,) and dist.num_replicas == 1
    for batch in _cartpole_batches(spec, config, 2):
        m_dist, m_single = dist.update(batch), single.update(batch)
        assert m_dist["applied"] and m_dist["num_valid"] == batch.num_valid
        assert m_dist["loss"] == pytest.approx(m_single["loss"], abs=1e-14)
        assert m_dist["grad_norm"] == pytest.approx(m_single["grad_norm"], rel=1e-13)
    for name, w in single.get_weights().items():
        np.testing.assert_allclose(dist.get_weights()[name], w, rtol=0, atol=1e-14, err_msg=name)
    assert not np.allclose(dist.get_weights()["policy/head/kernel"], weights["policy/head/kernel"])
    assert dist.trace_counts()["distributed_grads"] == 1
    assert dist.trace_counts()["distributed_apply"] == 1

    with pytest.raises(ValueError, match=r"got 2 batches but this process holds 1 replicas"):
        dist.update([batch, batch])
    with pytest.raises(ValueError, match="update_path='cached' is not supported"):
        DistributedReinforceAgent(spec, ReinforceConfig(update_path="cached"))


@pytest.mark.slow
def test_episodic_memory_and_optimizer_round_trip_through_a_distributed_checkpoint(tmp_path):
    # One-device mirrored run, episodic baseline with memory, Adam: 4 updates straight
    # through vs 2 updates, then --resume from the update-2 checkpoint for 2 more. The
    # oracle is the uninterrupted run; the memory must hold something to be a test of it.
    import tensorflow as tf

    from pgtwin.train.distributed_run import train_under_strategy
    from pgtwin.train.run import RunSettings, load_weights

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    config = ReinforceConfig(num_envs=3, num_steps=64, baseline="optimal_per_param",
                             baseline_memory=0.5, dtype="float64")
    said = []

    def settings(name, steps):
        return RunSettings("CartPole-v1", "eager", config, str(tmp_path / name), seed=2,
                           total_steps=steps, hidden=(8,), checkpoint_every=2,
                           stop_at_threshold=False, deterministic=True, progress=False,
                           tensorboard=False)

    whole = train_under_strategy(settings("whole", 4 * 192), strategy, "mirrored",
                                 say=said.append)
    train_under_strategy(settings("split", 2 * 192), strategy, "mirrored", say=said.append)
    resumed = train_under_strategy(settings("split", 4 * 192), strategy, "mirrored",
                                   resume=True, say=said.append)
    assert whole.updates == resumed.updates == 4 and resumed.resumed_from.endswith(
        os.path.join("worker_00000", "update_00000002"))
    memory = np.load(tmp_path / "split" / "checkpoints" / "worker_00000" / "update_00000002"
                     / "baseline_memory.npz")
    assert float(memory["count"]) > 0
    a, b = (load_weights(str(tmp_path / n / "weights.npz")) for n in ("whole", "split"))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_devices_already_initialised_is_a_clear_error():
    import tensorflow as tf

    tf.config.list_logical_devices("CPU")  # initialises TF's devices in this process
    with pytest.raises(ValueError, match="devices are already initialised"):
        make_strategy("mirrored", cpu_replicas=2)


# ------------------------------------------------------ two logical devices (subprocess)
def _logical_devices_run() -> dict:
    """Subprocess body: 2 replicas on 2 logical CPUs vs one device on the joined batch."""
    strategy = make_strategy("mirrored", cpu_replicas=2)  # before any other TF work
    from eager.agent import ReinforceAgent
    from eager.distributed import DistributedReinforceAgent

    report = {}
    for dtype in ("float32", "float64"):
        for case, kw in PARITY_CASES.items():
            config = ReinforceConfig(num_envs=3, num_steps=40, learning_rate=0.05,
                                     dtype=dtype, **kw)
            envs = [make_vec_env("CartPole-v1", 3, replica_env_seed(0, r, 3)) for r in (0, 1)]
            spec = spec_for_env(envs[0])
            dist = DistributedReinforceAgent(spec, config, seed=1, strategy=strategy)
            # The single-device reference without XLA: it is the oracle here, not under test,
            # and its XLA compiles only added to this subprocess's time.
            single = ReinforceAgent(spec, config.replace(jit_compile=False), seed=1)
            rows = []
            # Two updates: the second Adam step uses both moments of the first.
            for row, batches, whole, m_dist, m_single in _two_replica_updates(
                    dist, single, envs, [replica_rng(0, r) for r in (0, 1)]):
                rows.append({
                    **row,
                    "loss_err": abs(m_dist["loss"] - m_single["loss"]),
                    "num_valid": [m_dist["num_valid"], whole.num_valid],
                    "valid_per_replica": [b.num_valid for b in batches],
                    "same_obs": bool(np.array_equal(batches[0].obs, batches[1].obs)),
                })
            for e in envs:
                e.close()
            report[f"{dtype}/{case}"] = {"rows": rows, "trace_counts": dist.trace_counts(),
                                         "replicas": dist.num_replicas}
        report[f"{dtype}/optimal_scalar"] = _optimal_scalar_case(strategy, dtype)
    for baseline, kw in EPISODIC_CASES.items():
        report[f"float64/{baseline}"] = _episodic_case(strategy, baseline, kw)
    return report


def _two_replica_updates(dist, single, envs, rngs, num_updates: int = 2):
    """Yield ``(row, batches, whole, dist metrics, single metrics)`` per update: each replica
    collects with the distributed agent's policy; ``single`` learns from the joined batch.
    ``row`` holds the gradient and weight errors, the norms and ``applied`` of both."""
    states = [None] * len(envs)
    for _ in range(num_updates):
        batches = []
        for r, env in enumerate(envs):
            batch, states[r] = collect(env, dist.rollout_policy(), dist.spec,
                                       dist.config.num_steps, rngs[r], states[r])
            batches.append(batch)
        whole = concat_batches(batches)
        g_dist, g_single = dist.gradients(batches), single.gradients(whole)
        m_dist, m_single = dist.update(batches), single.update(whole)
        w_dist, w_single = dist.get_weights(), single.get_weights()
        row = {
            "grad_err": max(float(np.abs(g_dist[k] - g_single[k]).max()) for k in g_dist),
            "grad_scale": max(float(np.abs(g).max()) for g in g_single.values()),
            "weight_err": max(float(np.abs(w_dist[k] - w_single[k]).max()) for k in w_dist),
            "norm": [m_dist["grad_norm"], m_single["grad_norm"]],
            "applied": [m_dist["applied"], m_single["applied"]],
        }
        yield row, batches, whole, m_dist, m_single


def _episodic_case(strategy, baseline: str, kw: dict) -> dict:
    """2 replicas with an episodic baseline vs ``eager.agent.ReinforceAgent`` (the
    single-device ``pgtwin_core.baselines`` formulas: complete episodes, leave-one-out, padding,
    normalisation) fed the joined batch; float64, two updates (SGD, so a gradient counted
    twice or a per-replica mean would show), rollouts with the distributed agent's policy."""
    from eager.agent import ReinforceAgent
    from eager.distributed import DistributedReinforceAgent

    config = ReinforceConfig(num_envs=3, num_steps=48, learning_rate=0.0625, dtype="float64",
                             optimizer="sgd", baseline=baseline, **kw)
    envs = [make_vec_env("CartPole-v1", 3, replica_env_seed(2, r, 3)) for r in (0, 1)]
    spec = spec_for_env(envs[0], hidden=(16,))
    dist = DistributedReinforceAgent(spec, config, seed=3, strategy=strategy)
    single = ReinforceAgent(spec, config.replace(jit_compile=False), seed=3)  # no XLA: as above
    rows = []
    for row, batches, _, m_dist, m_single in _two_replica_updates(
            dist, single, envs, [replica_rng(2, r) for r in (0, 1)]):
        # The memory of earlier batches (default baseline_memory 0.9; the second update
        # reads the first's): from the all-reduced sums, it is the single device's.
        m_a, m_b = dist.baseline_memory.state(), single.baseline_memory.state()
        rows.append({
            **row,
            "memory_keys": [sorted(m_a), sorted(m_b)],
            "memory_err": max(float(np.max(np.abs(m_a[k] - m_b[k]) / np.maximum(1.0, np.abs(m_b[k]))))
                              for k in m_b),
            "memory_count": float(m_a["count"]),
            "loss": [m_dist["loss"], m_single["loss"]],
            "baseline": [m_dist["baseline"], m_single["baseline"]],
            "episodes": [m_dist["episodes"], m_single["episodes"]],
            "episodes_per_replica": [int(np.sum((b.terminated | b.truncated) & b.valid))
                                     for b in batches],
        })
    for e in envs:
        e.close()
    return {"rows": rows}


def _per_sample_gradients_by_loop(agent, obs, actions) -> np.ndarray:
    """``[B, P]``: grad log pi(a_i|s_i), one tape per sample (the slow, obvious way)."""
    import tensorflow as tf

    from pgtwin.mode_agnostic import distributions, forward_pass

    @tf.function  # one trace: every call sees a one-sample batch
    def one_sample(obs_1, actions_1):
        with tf.GradientTape() as tape:
            params = forward_pass.dist_params(agent.spec, agent.variables, obs_1)
            logp = distributions.log_prob(agent.spec, params, actions_1)
        return tape.gradient(logp, list(agent.variables.values()))

    rows = [np.concatenate([g.numpy().ravel() for g in one_sample(obs[i:i + 1], actions[i:i + 1])])
            for i in range(obs.shape[0])]
    return np.stack(rows)


def _optimal_scalar_case(strategy, dtype: str) -> dict:
    """2 replicas with ``optimal_scalar`` against a numpy oracle on the joined batch.

    Oracle (Greensmith et al. 2004, per step): g_i from one tape per sample,
    s_i = ||g_i||^2, R = normalised reward-to-go of the joined batch,
    b* = sum_i valid_i s_i R_i / sum_i valid_i s_i, A_i = valid_i (R_i - b*),
    gradient of the loss = -sum_i (valid_i / num_valid) A_i g_i; SGD: w' = w - lr * gradient.
    """
    from pgtwin_core.advantages import flat_returns

    from eager.agent import ReinforceAgent
    from eager.distributed import DistributedReinforceAgent

    # lr = 2^-4 is exact in float32, where Keras keeps the learning rate.
    config = ReinforceConfig(num_envs=3, num_steps=24, learning_rate=0.0625, dtype=dtype,
                             optimizer="sgd", baseline="optimal_scalar")
    envs = [make_vec_env("CartPole-v1", 3, replica_env_seed(1, r, 3)) for r in (0, 1)]
    spec = spec_for_env(envs[0])
    dist = DistributedReinforceAgent(spec, config, seed=2, strategy=strategy)
    # eager/baselines.py on the joined batch (the reference without XLA, as above)
    single = ReinforceAgent(spec, config.replace(jit_compile=False), seed=2)
    batches = [collect(envs[r], dist.rollout_policy(), dist.spec, config.num_steps,
                       replica_rng(1, r))[0] for r in (0, 1)]
    whole = concat_batches(batches)
    obs = whole.obs.reshape(-1, *spec.obs_shape).astype(dtype)
    actions = whole.actions.reshape(-1)
    g = _per_sample_gradients_by_loop(dist, obs, actions).astype(np.float64)
    valid = whole.valid.reshape(-1).astype(np.float64)
    returns = flat_returns(whole, config).reshape(-1)
    s = np.sum(g * g, axis=1)
    b_star = np.sum(valid * s * returns) / np.sum(valid * s)
    oracle = -((valid / valid.sum()) * valid * (returns - b_star)) @ g
    before = np.concatenate([w.ravel() for w in dist.get_weights().values()])
    grads = dist.gradients(batches)
    single_grads = single.gradients(whole)
    metrics, single_metrics = dist.update(batches), single.update(whole)
    after = np.concatenate([w.ravel() for w in dist.get_weights().values()])
    mean_return = np.sum(valid * returns) / valid.sum()
    for e in envs:
        e.close()
    return {
        "baseline": [metrics["baseline"], float(b_star), single_metrics["baseline"]],
        "single_grad_err": max(float(np.abs(grads[k] - single_grads[k]).max()) for k in grads),
        "mean_baseline": float(mean_return),
        "grad_err": float(np.abs(np.concatenate([x.ravel() for x in grads.values()])
                                 - oracle).max()),
        "grad_scale": float(np.abs(oracle).max()),
        "weight_err": float(np.abs(after - (before - config.learning_rate * oracle)).max()),
        "valid_per_replica": [b.num_valid for b in batches],
    }


@pytest.mark.slow
def test_two_logical_devices_equal_one_device_on_the_concatenated_batch():
    proc = subprocess.run(
        [sys.executable, "-m", "tests.test_distributed", "logical-devices"], cwd=ROOT,
        env=_subprocess_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = _last_json_line(proc.stdout)
    assert set(report) == ({f"{d}/{c}" for d in TOL for c in (*PARITY_CASES, "optimal_scalar")}
                           | {f"float64/{b}" for b in EPISODIC_CASES})
    for dtype in TOL:
        _check_optimal_scalar(report.pop(f"{dtype}/optimal_scalar"), TOL[dtype], dtype)
    for baseline in EPISODIC_CASES:
        _check_episodic(report.pop(f"float64/{baseline}"), TOL["float64"], baseline)
    unequal_valid = 0
    for key, result in report.items():
        tol = TOL[key.split("/")[0]]
        assert result["replicas"] == 2, key
        assert result["trace_counts"]["distributed_grads"] == 1, key
        for u, row in enumerate(result["rows"]):
            where = f"{key} update {u}"
            assert row["applied"] == [True, True], where
            assert row["num_valid"][0] == row["num_valid"][1], where
            assert not row["same_obs"], f"{where}: replicas saw the same envs"
            assert row["grad_err"] <= tol["grad"] * max(1.0, row["grad_scale"]), (where, row)
            assert row["loss_err"] <= tol["loss"], (where, row)
            assert row["weight_err"] <= tol["weight"], (where, row)
            assert row["norm"][0] == pytest.approx(row["norm"][1], rel=10 * tol["grad"])
            unequal_valid += row["valid_per_replica"][0] != row["valid_per_replica"][1]
    # Replicas holding different numbers of valid steps is what tells a global mean from a
    # mean of per-replica means; the run must contain such updates to be a test of it.
    assert unequal_valid >= 2


def _check_episodic(result: dict, tol: dict, baseline: str) -> None:
    unequal = 0
    for u, row in enumerate(result["rows"]):
        where = f"float64/{baseline} update {u}: {row}"
        assert row["applied"] == [True, True], where
        assert row["episodes"][0] == row["episodes"][1] > 2, where
        assert row["grad_err"] <= tol["grad"] * max(1.0, row["grad_scale"]), where
        assert row["weight_err"] <= tol["weight"], where
        assert row["loss"][0] == pytest.approx(row["loss"][1], abs=tol["loss"]), where
        assert row["norm"][0] == pytest.approx(row["norm"][1], rel=10 * tol["grad"]), where
        assert row["baseline"][0] == pytest.approx(row["baseline"][1], rel=10 * tol["grad"]), where
        assert row["memory_keys"] == [["count", "den", "num", "sum_r"]] * 2, where
        assert row["memory_err"] <= 10 * tol["grad"], where
        assert row["memory_count"] > 0, where
        unequal += row["episodes_per_replica"][0] != row["episodes_per_replica"][1]
    # Replicas ending different numbers of episodes tell global sums over episodes from
    # per-replica means (or leave-one-out over one replica's episodes only).
    assert unequal >= 1, result


def _check_optimal_scalar(row: dict, tol: dict, dtype: str) -> None:
    where = f"{dtype}/optimal_scalar: {row}"
    # b* from all-reduced sums equals the oracle's over the joined batch...
    assert row["baseline"][0] == pytest.approx(row["baseline"][1], rel=10 * tol["grad"]), where
    assert row["baseline"][0] == pytest.approx(row["baseline"][2], rel=10 * tol["grad"]), where
    assert row["single_grad_err"] <= tol["grad"] * max(1.0, row["grad_scale"]), where
    # ...and is not the mean baseline (else the test could not tell them apart).
    assert abs(row["baseline"][1] - row["mean_baseline"]) > 100 * tol["grad"], where
    assert row["grad_err"] <= tol["grad"] * max(1.0, row["grad_scale"]), where
    assert row["weight_err"] <= tol["weight"], where


# ------------------------------------------------------- two worker processes (localhost)
@pytest.mark.slow
def test_two_workers_train_to_identical_weights(tmp_path):
    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for index in (0, 1):
        env = _subprocess_env()
        env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": index}})
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pgtwin.train.distributed", "--strategy", "multi-worker",
             "--env", "CartPole-v1", "--updates", "3", "--num-envs", "4", "--num-steps", "32",
             "--optimizer", "sgd", "--learning-rate", "0.1", "--seed", "0",
             "--save-weights", str(tmp_path / f"w{index}.npz")],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=120))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    summaries = [_last_json_line(out) for out, _ in outputs]
    assert [s["replica_ids"] for s in summaries] == [[0], [1]]
    assert all(s["num_replicas"] == 2 and s["updates"] == 3 for s in summaries)
    assert summaries[0]["last_loss"] == summaries[1]["last_loss"]
    # Different local data (env seeds 0..3 vs 4..7): had each worker trained alone, their
    # weights would differ.
    assert summaries[0]["recent_mean_return"] != summaries[1]["recent_mean_return"]

    w0, w1 = (dict(np.load(tmp_path / f"w{i}.npz")) for i in (0, 1))
    spec = spec_for_env(make_vec_env("CartPole-v1", 1))
    init = init_weights(spec, 0, dtype="float32")
    assert set(w0) == set(w1) == set(init)
    for name in init:
        np.testing.assert_array_equal(w0[name], w1[name], err_msg=name)
    assert not np.array_equal(w0["policy/head/kernel"], init["policy/head/kernel"])


if __name__ == "__main__":
    print(json.dumps({"logical-devices": _logical_devices_run}[sys.argv[1]]()))


def test_a_distributed_run_is_refused_while_another_process_holds_its_run_directory(tmp_path):
    # Issue 17's run lock covers runs under a strategy too: the chief takes it. A lock held
    # elsewhere (here: another open of the same lock file) refuses the run before any work,
    # naming the owner.
    import tensorflow as tf

    from pgtwin.train.distributed_run import train_under_strategy
    from pgtwin.train.run import RunSettings, TrainingError
    from pgtwin.train.run_lock import RunLock

    logdir = str(tmp_path / "run")
    os.makedirs(logdir)
    settings = RunSettings("CartPole-v1", "eager", ReinforceConfig(num_envs=2, num_steps=8),
                           logdir, total_steps=16, hidden=(4,), progress=False,
                           tensorboard=False)
    with RunLock(logdir):
        with pytest.raises(TrainingError, match=f"in use by process {os.getpid()}"):
            train_under_strategy(settings, tf.distribute.MirroredStrategy(["/cpu:0"]),
                                 "mirrored")
    assert not os.path.exists(os.path.join(logdir, "run.json"))  # nothing was written


def test_resume_with_other_cpu_replicas_is_a_usage_error_in_the_flags_terms(capsys, tmp_path):
    # It failed later, with exit 1 and two ClusterShape(...) reprs.
    import json as json_module

    from pgtwin.cli import main
    from pgtwin.train.distributed_run import CLUSTER
    from pgtwin.train.run import RunSettings, run_paths, write_settings

    logdir = str(tmp_path / "run")
    write_settings(run_paths(logdir), RunSettings("CartPole-v1", "eager", ReinforceConfig(),
                                                  logdir))
    with open(os.path.join(logdir, CLUSTER), "w") as f:
        json_module.dump({"strategy": "mirrored", "num_workers": 1, "num_replicas": 2,
                          "cpu_replicas": 2}, f)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", "--logdir", logdir, "--cpu-replicas", "3"])
    assert exit_info.value.code == 2
    assert (f"--resume: {logdir} was trained as --strategy mirrored --cpu-replicas 2 (1 worker, "
            "2 replicas); its checkpoints are cut to that many replicas, so --cpu-replicas 3 "
            "cannot resume it") in capsys.readouterr().err
