"""``pgtwin train --strategy``: the run directory, sharded checkpoints, ``--resume`` after a
SIGKILL, a corrupted shard, and a lost worker.

The oracle is one uninterrupted run, ``--strategy mirrored --cpu-replicas 2`` in
deterministic mode: 2 replicas in one process. Every interrupted run must end with its
final weights and its episode log (every column but wall-clock time) bit for bit equal to
it: the mirrored run killed and resumed, and the same 2 replicas as 2 worker processes on
localhost (``MultiWorkerMirroredStrategy``, ``TF_CONFIG`` per process, free ports), one of
them SIGKILLed after its third checkpoint, a bit flipped in its shard of the newest
checkpoint both workers wrote, and the cluster restarted with ``--resume``: both workers
must fall back to the checkpoint before it.
(Two replicas sum their gradients in one addition, which is commutative, so the two
strategies agree to the bit.)

Runs use ``SlowCartPole-v0`` (tests/cli_envs.py, 2 ms per step) so a run lasts long
enough to be killed in the middle; every subprocess is bounded by a timeout.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from pgtwin.train import checkpoint_shards, checkpoints
from pgtwin.train.episode_log import read_episodes
from pgtwin.train.run import load_weights

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPDATES = 18
EVERY = 3
WORKER_TIMEOUT = 20
NUM_ENVS = 2
RUN = ["--env", "tests.cli_envs:SlowCartPole-v0", "--seed", "3", "--num-envs", str(NUM_ENVS),
       "--num-steps", "8", "--hidden", "8", "--steps", str(2 * NUM_ENVS * 8 * UPDATES),
       "--checkpoint-every", str(EVERY), "--deterministic", "--no-stop", "--no-progress",
       "--json"]
MIRRORED = ["--strategy", "mirrored", "--cpu-replicas", "2"]
MULTI = ["--strategy", "multi-worker", "--worker-timeout", str(WORKER_TIMEOUT)]
LIMIT = 180  # seconds: any one process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pgtwin(*argv, tf_config: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.Popen([sys.executable, "-m", "pgtwin", "train", *argv], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cluster(*argv) -> list[subprocess.Popen]:
    """Two workers on localhost, ports chosen now."""
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    return [_pgtwin(*argv, tf_config={"cluster": {"worker": workers},
                                      "task": {"type": "worker", "index": i}})
            for i in range(2)]


def _finish(procs: list[subprocess.Popen], timeout: float = LIMIT) -> list[str]:
    """Every process's stderr, once each has exited 0 (killed after ``timeout``)."""
    errs = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=timeout)
            errs.append(err)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, err in zip(procs, errs):
        assert proc.returncode == 0, err[-3000:]
    return errs


def _complete(logdir: str, worker: int) -> int:
    """The newest update whose shard on ``worker`` verifies (0: none)."""
    last = checkpoints.find_latest(
        checkpoint_shards.shard_root(os.path.join(logdir, "checkpoints"), worker))[0]
    return 0 if last is None else last.update


def _wait_for(condition, procs, what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        for proc in procs:
            assert proc.poll() is None, (what, proc.communicate()[1][-3000:])
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _verified(logdir: str, worker: int) -> set[int]:
    """The updates of ``worker``'s shards that verify."""
    found = set()
    root = checkpoint_shards.shard_root(os.path.join(logdir, "checkpoints"), worker)
    for update, path in checkpoints.list_checkpoints(root):
        try:
            checkpoints.verify(path)
        except checkpoints.CheckpointError:
            continue
        found.add(update)
    return found


def _rows(logdir: str) -> int:
    path = os.path.join(logdir, "episodes.csv")
    return len(read_episodes(path)["episode"]) if os.path.exists(path) else 0


def _same_run(oracle: str, run: str) -> None:
    a = read_episodes(os.path.join(oracle, "episodes.csv"))
    b = read_episodes(os.path.join(run, "episodes.csv"))
    for col in ("episode", "update", "env_steps", "env_index", "return", "length"):
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)
    wa, wb = (load_weights(os.path.join(d, "weights.npz")) for d in (oracle, run))
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The oracle, the mirrored run killed and resumed, and the 2-worker run with worker 1
    killed, a shard corrupted and the cluster resumed (one resume for both scenarios: each
    is a cluster start, ~10 s of TensorFlow start-up per process)."""
    root = tmp_path_factory.mktemp("distributed_runs")
    ref, mirrored, multi = (str(root / n) for n in ("ref", "mirrored", "multi"))
    out = {"ref": ref, "mirrored": mirrored, "multi": multi}

    ref_proc = _pgtwin(*RUN, *MIRRORED, "--logdir", ref)
    # Mirrored: killed once update 6 is checkpointed and episodes beyond it are logged.
    proc = _pgtwin(*RUN, *MIRRORED, "--logdir", mirrored)
    _wait_for(lambda: _complete(mirrored, 0) >= 2 * EVERY and _rows(mirrored) > 0
              and _rows(mirrored) > checkpoints.find_latest(checkpoint_shards.shard_root(
                  os.path.join(mirrored, "checkpoints"), 0))[0].meta["episodes"],
              [proc], "the mirrored run's second checkpoint")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    out["mirrored_killed_at"] = _complete(mirrored, 0)
    out["mirrored_err"] = _finish([_pgtwin("--resume", "--logdir", mirrored, "--no-progress",
                                           "--json")])[0]
    _finish([ref_proc])

    # Two workers keeping 3 checkpoints each: worker 1 SIGKILLed after its third; worker 0
    # must stop.
    workers = _cluster(*RUN, *MULTI, "--keep-checkpoints", "3", "--logdir", multi)
    _wait_for(lambda: _complete(multi, 1) >= 3 * EVERY, workers, "worker 1's third checkpoint")
    workers[1].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    workers[1].communicate()
    try:
        _, err0 = workers[0].communicate(timeout=LIMIT)
    finally:
        if workers[0].poll() is None:
            workers[0].kill()
            workers[0].communicate()
    out["lost"] = {"returncode": workers[0].returncode, "err": err0,
                   "seconds": time.monotonic() - killed,
                   "shards": [_complete(multi, w) for w in (0, 1)],
                   "weights_written": os.path.exists(os.path.join(multi, "weights.npz"))}
    # A flipped bit in worker 1's shard of the newest update both workers hold: the resume
    # must fall back, on both, to the one before (worker 1 holds its last 3 updates, worker
    # 0 stopped within one checkpoint of it, so two of them are common).
    common = sorted(_verified(multi, 0) & _verified(multi, 1))
    assert len(common) >= 2, (common, _verified(multi, 0), _verified(multi, 1))
    out["corrupt_update"], out["resume_update"] = common[-1], common[-2]
    state = os.path.join(checkpoints.checkpoint_path(checkpoint_shards.shard_root(
        os.path.join(multi, "checkpoints"), 1), common[-1]), "state.json")
    data = bytearray(open(state, "rb").read())
    data[len(data) // 2] ^= 0x20
    open(state, "wb").write(bytes(data))
    out["corrupt_state"] = state
    out["multi_errs"] = _finish(_cluster("--resume", "--logdir", multi, "--no-progress",
                                         "--json", "--worker-timeout", str(WORKER_TIMEOUT)))
    return out


@pytest.mark.slow
def test_the_run_directory_of_a_distributed_run(runs):
    ref = runs["ref"]
    for name in ("run.json", "cluster.json", "episodes.csv", "learning_curve.png",
                 "weights.npz"):
        assert os.path.isfile(os.path.join(ref, name)), name
    assert os.listdir(os.path.join(ref, "tb"))
    shards = os.path.join(ref, "checkpoints", "worker_00000")
    # keep_checkpoints 2: the final update and the one before.
    assert sorted(os.listdir(shards)) == [f"update_{u:08d}" for u in (UPDATES - EVERY, UPDATES)]
    last = os.path.join(shards, f"update_{UPDATES:08d}")
    for rel in ("manifest.json", "state.json", "agent/ckpt.index", "replica_00000/env.pkl",
                "replica_00001/rollout.npz"):
        assert os.path.isfile(os.path.join(last, rel)), rel
    episodes = read_episodes(os.path.join(ref, "episodes.csv"))
    # Rows from both replicas' envs (global index r * num_envs + i), in global step order.
    assert set(episodes["env_index"]) == set(range(2 * NUM_ENVS))
    assert np.all(np.diff(episodes["env_steps"]) >= 0)
    np.testing.assert_array_equal(episodes["episode"], np.arange(len(episodes["episode"])))


@pytest.mark.slow
def test_mirrored_sigkill_then_resume_equals_the_uninterrupted_run(runs):
    at = runs["mirrored_killed_at"]
    assert 2 * EVERY <= at < UPDATES
    assert f"resuming update {at}, the newest checkpoint complete on all 1 worker(s)" in \
        runs["mirrored_err"]
    _same_run(runs["ref"], runs["mirrored"])


@pytest.mark.slow
def test_a_lost_worker_ends_the_other_within_the_timeout(runs):
    lost, multi = runs["lost"], runs["multi"]
    assert lost["returncode"] == 1, lost["err"][-3000:]
    assert lost["seconds"] <= WORKER_TIMEOUT, lost
    assert not lost["weights_written"]
    assert "worker 1 of 2 was lost during update" in lost["err"], lost["err"][-3000:]
    # Worker 0 names the newest checkpoint it knows complete on both (and the one it
    # wrote, if worker 1 died between writing its shard and the barrier), and the command.
    complete = min(lost["shards"])
    assert complete >= 2 * EVERY
    known = (f"Checkpoint update {complete} is complete on every worker",
             f"(update {complete}, written here, is too if every worker wrote its shard")
    assert any(k in lost["err"] for k in known), lost["err"][-1500:]
    # tests.cli_envs was found in the working directory (and PYTHONPATH): the command
    # carries it, so a restart from elsewhere imports the env module again
    assert (f"restart all 2 workers, each with its TF_CONFIG: PYTHONPATH={REPO} pgtwin train "
            f"--resume --logdir {multi}") in lost["err"]


@pytest.mark.slow
def test_two_workers_killed_and_resumed_equal_the_uninterrupted_run(runs):
    for w, err in enumerate(runs["multi_errs"]):
        assert (f"worker {w}: resuming update {runs['resume_update']}, the newest checkpoint "
                f"complete on all 2 worker(s)") in err, err[-3000:]
    _same_run(runs["ref"], runs["multi"])
    episodes = read_episodes(os.path.join(runs["multi"], "episodes.csv"))
    # One log for both workers: replica r (worker r here) owns envs r * N .. r * N + N - 1.
    np.testing.assert_array_equal(episodes["worker"], episodes["env_index"] // NUM_ENVS)
    assert set(episodes["worker"]) == {0, 1}


@pytest.mark.slow
def test_a_corrupted_shard_falls_back_on_every_worker(runs):
    err0, err1 = runs["multi_errs"]
    assert (f"worker 1: refusing checkpoint {os.path.dirname(runs['corrupt_state'])}: file "
            "state.json fails its sha256 check") in err1, err1[-3000:]
    assert runs["resume_update"] < runs["corrupt_update"]
    # Worker 0's shard of the corrupted update was not complete on every worker: put aside.
    assert "is not complete on every worker" in err0, err0[-3000:]
    _same_run(runs["ref"], runs["multi"])
