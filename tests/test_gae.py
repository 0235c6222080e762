"""GAE (``ReinforceConfig.gae_lambda``): ``pgtwin_core.gae.lambda_advantages`` by hand, against
a slow numpy loop, its identities (lambda = 1: Monte-Carlo; lambda = 0: one-step TD); the
value path's bootstrapped states; both twins' updates with it (float32 and float64); the
config's and the CLI's refusals."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.gae import lambda_advantages
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin_core.value_path import ValueInputs
from pgtwin.twins import agent_class

# Two envs, T = 5, gamma = lambda = 0.5 (gamma * lambda = 0.25).
# env 0: steps 0-1, truncated at t = 1 (bootstrap 4); t = 2 the autoreset step; a new
#        episode at t = 3-4, cut by the rollout (bootstrap 6).
# env 1: steps 0-2, terminated at t = 2 (its bootstrap 100 must be ignored); autoreset at
#        t = 3; a new episode at t = 4, cut (bootstrap 8).
REWARDS = np.array([[1, 1], [2, 1], [0, 1], [3, 0], [4, 2]], float)
VALUES = np.array([[1, 2], [1, 2], [9, 2], [2, 5], [2, 4]], float)
BOOTSTRAP = np.array([[0, 0], [4, 0], [0, 100], [0, 0], [6, 8]], float)
TERMINATED = np.zeros((5, 2), bool)
TERMINATED[2, 1] = True
TRUNCATED = np.zeros((5, 2), bool)
TRUNCATED[1, 0] = True
# env 0: d4 = 4 + .5*6 - 2 = 5;            A4 = 5
#        d3 = 3 + .5*v4(2) - 2 = 2;        A3 = 2 + .25*5 = 3.25
#        d2 = 0 + .5*v3(2) - 9 = -8;       A2 = -8 + .25*3.25 = -7.1875 (autoreset: masked)
#        d1 = 2 + .5*4 - 1 = 3 (truncated) A1 = 3
#        d0 = 1 + .5*v1(1) - 1 = .5;       A0 = .5 + .25*3 = 1.25
# env 1: d4 = 2 + .5*8 - 4 = 2;            A4 = 2
#        d3 = 0 + .5*v4(4) - 5 = -3;       A3 = -3 + .25*2 = -2.5 (autoreset: masked)
#        d2 = 1 - 2 = -1 (terminated);     A2 = -1
#        d1 = 1 + .5*2 - 2 = 0;            A1 = 0 + .25*(-1) = -.25
#        d0 = 1 + .5*2 - 2 = 0;            A0 = 0 + .25*(-.25) = -.0625
EXPECTED = np.array([[1.25, -0.0625], [3, -0.25], [-7.1875, -1], [3.25, -2.5], [5, 2]])


def test_hand_derived_values_with_a_boundary_and_a_truncation():
    got = lambda_advantages(REWARDS, VALUES, TERMINATED, TRUNCATED, 0.5, 0.5, BOOTSTRAP)
    np.testing.assert_allclose(got, EXPECTED, rtol=1e-15, err_msg="see the hand derivation")
    # one env alone ([T]) gives its column
    np.testing.assert_allclose(
        lambda_advantages(REWARDS[:, 1], VALUES[:, 1], TERMINATED[:, 1], TRUNCATED[:, 1],
                          0.5, 0.5, BOOTSTRAP[:, 1]), EXPECTED[:, 1], rtol=1e-15)


def slow_gae(r, v, term, trunc, gamma, lam, boot):
    """The definition, one env and one t at a time: A_t = sum_l (gamma lam)^l delta_{t+l},
    the sum stopping at the step that ends the episode (or the array)."""
    T, N = r.shape
    out = np.zeros((T, N))
    for n in range(N):
        delta = []
        for t in range(T):
            ends = term[t, n] or trunc[t, n] or t == T - 1
            if term[t, n]:
                nxt = 0.0
            elif ends:
                nxt = boot[t, n]
            else:
                nxt = v[t + 1, n]
            delta.append(r[t, n] + gamma * nxt - v[t, n])
        for t in range(T):
            total, k = 0.0, t
            while True:
                total += (gamma * lam) ** (k - t) * delta[k]
                if term[k, n] or trunc[k, n] or k == T - 1:
                    break
                k += 1
            out[t, n] = total
    return out


@pytest.mark.parametrize("seed", range(3))
def test_matches_a_slow_loop_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    T, N = 12, 3
    r, v, boot = (rng.normal(size=(T, N)) for _ in range(3))
    flags = rng.integers(0, 6, (T, N))  # 0: terminated, 1: truncated, else neither
    gamma, lam = rng.uniform(0.5, 1.0), rng.uniform(0.0, 1.0)
    got = lambda_advantages(r, v, flags == 0, flags == 1, gamma, lam, boot)
    np.testing.assert_allclose(got, slow_gae(r, v, flags == 0, flags == 1, gamma, lam, boot),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bootstrap", [None, BOOTSTRAP])
def test_lambda_one_is_the_reward_to_go_less_the_values(bootstrap):
    got = lambda_advantages(REWARDS, VALUES, TERMINATED, TRUNCATED, 0.9, 1.0, bootstrap)
    g = discounted_returns(REWARDS, TERMINATED, TRUNCATED, 0.9, bootstrap)
    np.testing.assert_allclose(got, g - VALUES, rtol=1e-12, atol=1e-12)


def test_lambda_zero_is_the_td_error():
    got = lambda_advantages(REWARDS, VALUES, TERMINATED, TRUNCATED, 0.5, 0.0, BOOTSTRAP)
    # delta from the hand derivation above
    np.testing.assert_allclose(got, [[0.5, 0], [3, 0], [-8, -1], [2, -3], [5, 2]], rtol=1e-15)


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match=r"values has shape \(5,\) but rewards has shape"):
        lambda_advantages(REWARDS, VALUES[:, 0], TERMINATED, TRUNCATED, 0.5, 0.5)
    with pytest.raises(ValueError, match=r"lambda_ must be a finite number in \[0, 1\], got 1.5"):
        lambda_advantages(REWARDS, VALUES, TERMINATED, TRUNCATED, 0.5, 1.5)
    bad = VALUES.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"values\[3, 1\] is nan"):
        lambda_advantages(REWARDS, bad, TERMINATED, TRUNCATED, 0.5, 0.5)


def test_config_refuses_gae_without_the_value_baseline():
    with pytest.raises(ValueError, match="gae_lambda=0.9 cannot serve baseline='mean'.*"
                                         "use baseline='value'"):
        ReinforceConfig(baseline="mean", gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"gae_lambda=1.5 must be None .* or a number in \[0, 1\]"):
        ReinforceConfig(baseline="value", gae_lambda=1.5)
    assert ReinforceConfig().gae_lambda is None


# ---------------------------------------------------------------- the value path
SPEC = PolicySpec("categorical", (2,), 2, hidden=(3,))
HORIZON = 4


def config(**changes) -> ReinforceConfig:
    base = dict(baseline="value", dtype="float64", num_envs=2, num_steps=5,
                value_horizon=HORIZON, value_learning_rate=0.1, value_fit_steps=2,
                optimizer="sgd", gamma=0.5, gae_lambda=0.5)
    return ReinforceConfig(**{**base, **changes})


def batch() -> Batch:
    """The flags above: env 0 truncated at t = 1 (its last observation is obs[2, 0], the
    autoreset step's input), env 1 terminated at t = 2; both cut at t = 4 (next_obs).
    Episode steps as the rollout records them; env 1's first episode began 1 step before."""
    rng = np.random.default_rng(7)
    valid = np.ones((5, 2), bool)
    valid[2, 0] = valid[3, 1] = False
    steps = np.array([[2, 1], [3, 2], [-1, 3], [0, -1], [1, 0]])
    return Batch(obs=rng.normal(size=(5, 2, 2)), actions=rng.integers(0, 2, (5, 2)),
                 rewards=REWARDS * valid, terminated=TERMINATED, truncated=TRUNCATED,
                 log_probs=np.zeros((5, 2)), valid=valid, next_obs=rng.normal(size=(2, 2)),
                 episode_returns=np.zeros(2), episode_lengths=np.array([4, 4]),
                 episode_steps=steps)


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_value_path_bootstraps_the_last_and_the_cut_states(impl):
    # inputs() fits nothing: A = GAE of the net's V, the bootstrap read at
    #   [1, 0] (truncated): V(obs[2, 0], tau = (3 + 1) / 4)
    #   [4, 0], [4, 1] (cut): V(next_obs[n], tau = (steps[4, n] + 1) / 4)
    # R = A + V, both divided by the std of A + V over the valid steps.
    cfg = config()
    agent = agent_class(impl)(SPEC, cfg, seed=3)
    net, b = agent.value_net, batch()
    net.set_target_stats(-1.0, 2.0)  # V not centred at 0, so a wrong bootstrap shows
    fed = ValueInputs(b, cfg, SPEC, np.zeros((5, 2)))
    v = net.predict(fed.obs, fed.tau).reshape(5, 2)
    boot = np.zeros((5, 2))
    boot[1, 0] = net.predict(b.obs[2, :1], np.array([4 / HORIZON]))[0]
    boot[4] = net.predict(b.next_obs, np.array([2 / HORIZON, 1 / HORIZON]))
    a = slow_gae(b.rewards, v, TERMINATED, TRUNCATED, 0.5, 0.5, boot)
    g = np.where(b.valid, a + v, 0.0)
    scale = g[b.valid].std() + 1e-8
    got = agent.update_path.inputs(b)
    np.testing.assert_allclose(got.advantages, np.where(b.valid, a, 0.0).reshape(-1) / scale,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.returns, g.reshape(-1) / scale, rtol=1e-12, atol=1e-12)
    agent.close()


def test_lambda_one_without_cuts_equals_the_monte_carlo_path():
    # Every episode inside the batch ends by termination: nothing is bootstrapped, so
    # lambda = 1 gives G - V, the advantages of gae_lambda=None, exactly as computed there.
    b = batch()
    term = np.zeros((5, 2), bool)
    term[1, 0] = term[4, 0] = term[2, 1] = term[4, 1] = True
    b = Batch(**{**b.__dict__, "terminated": term, "truncated": np.zeros((5, 2), bool)})
    got = {}
    for lam in (None, 1.0):
        agent = agent_class("graph")(SPEC, config(gae_lambda=lam), seed=3)
        got[lam] = agent.update_path.inputs(b)
        agent.close()
    np.testing.assert_allclose(got[1.0].advantages, got[None].advantages, rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(got[1.0].returns, got[None].returns, rtol=1e-12)


@pytest.mark.parametrize("dtype, rtol, fit", [("float64", 1e-10, "before"),
                                              ("float32", 2e-4, "after")])
def test_twins_agree_on_updates_with_gae(dtype, rtol, fit):
    # Same numpy initial weights from seed 3; two Adam updates each on the batch above:
    # the metrics, the policy's and the value net's weights agree to the dtype's tolerance.
    # The eager twin under XLA in float32, without it in float64 (fewer XLA compiles).
    cfg = config(dtype=dtype, optimizer="adam", learning_rate=1e-2, value_fit=fit,
                 jit_compile=dtype == "float32")
    agents = {impl: agent_class(impl)(SPEC, cfg, seed=3) for impl in ("graph", "eager")}
    metrics = {impl: [a.update(batch()) for _ in range(2)] for impl, a in agents.items()}
    for key in ("loss", "grad_norm", "value_loss", "value_loss_after_fit"):
        np.testing.assert_allclose([m[key] for m in metrics["eager"]],
                                   [m[key] for m in metrics["graph"]], rtol=rtol, atol=rtol,
                                   err_msg=key)
    for part in ("get_weights", "value_weights"):
        g, e = ((a.get_weights() if part == "get_weights" else a.value_net.get_weights())
                for a in (agents["graph"], agents["eager"]))
        for n in g:
            np.testing.assert_allclose(e[n], g[n], rtol=rtol, atol=rtol * 1e-2, err_msg=n)
    for a in agents.values():
        a.close()


def test_training_inputs_take_the_lambda_returns_as_given():
    # The policy's arrays from (A + V, V): returns (A + V) / s, advantages A / s (no
    # reordering in training_inputs; the same call the value path makes).
    b, cfg = batch(), config()
    a = lambda_advantages(b.rewards, VALUES, TERMINATED, TRUNCATED, 0.5, 0.5, BOOTSTRAP)
    got = training_inputs(b, cfg, SPEC, a + VALUES, baseline=VALUES)
    g = np.where(b.valid, a + VALUES, 0.0)
    scale = g[b.valid].std() + 1e-8
    np.testing.assert_allclose(got.advantages, np.where(b.valid, a, 0).reshape(-1) / scale,
                               rtol=1e-12)


def test_a_run_saved_before_gae_lambda_resumes_without_it():
    # run.json and a checkpoint's settings written before the field existed lack it:
    # they read as gae_lambda=None and a resume with today's settings is not refused.
    from pgtwin.train.run import check_same_settings
    from pgtwin.train.settings import RunSettings, resolve

    settings = resolve("Pendulum-v1", {"baseline": "value", "gae_lambda": None,
                                       "logdir": "/tmp/unused"})
    old = settings.to_dict()
    del old["config"]["gae_lambda"]
    assert RunSettings.from_dict(old).config.gae_lambda is None
    check_same_settings("checkpoint update_00000002", old, settings)


def test_another_baseline_given_drops_a_row_s_gae():
    # A per-env row with GAE (its value baseline) and --baseline mean given: GAE goes with
    # the value baseline instead of refusing the env's defaults.
    from pgtwin.train import settings as table

    row = {**table.ENV_OVERRIDES["Pendulum-v1"], "baseline": "value", "gae_lambda": 0.9}
    saved, table.ENV_OVERRIDES["Pendulum-v1"] = table.ENV_OVERRIDES["Pendulum-v1"], row
    try:
        assert table.resolve("Pendulum-v1", {"logdir": "x"}).config.gae_lambda == 0.9
        got = table.resolve("Pendulum-v1", {"baseline": "mean", "logdir": "x"})
        assert got.config.gae_lambda is None and got.config.baseline == "mean"
    finally:
        table.ENV_OVERRIDES["Pendulum-v1"] = saved


def test_strategy_drops_a_table_gae_with_its_value_baseline(capsys, monkeypatch):
    # Under --strategy the table's value baseline becomes mean (test_distributed); a row's
    # GAE goes with it, named in the note, instead of a ReinforceConfig refusal.
    import argparse

    from pgtwin.cli.commands import train as train_command
    from pgtwin.train import settings as table

    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setitem(table.ENV_OVERRIDES, "Pendulum-v1",
                        {**table.ENV_OVERRIDES["Pendulum-v1"], "baseline": "value",
                         "gae_lambda": 0.9})
    parser = argparse.ArgumentParser(prog="pgtwin")
    train_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--env", "Pendulum-v1", "--strategy", "mirrored"])
    settings, _ = train_command.settings_from_args(args, parser)
    assert settings.config.gae_lambda == 0.9
    kept = train_command._without_table_only_options(args, settings)
    assert kept.config.baseline == "mean" and kept.config.gae_lambda is None
    assert "gae_lambda=0.9" in capsys.readouterr().err
