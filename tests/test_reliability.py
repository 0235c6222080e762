"""Reliability of ``pgtwin train``: a SIGKILL mid-run and ``--resume``, a corrupted
checkpoint, NaN from the env.

The oracle for resume is an uninterrupted run with the same seed in deterministic mode:
the resumed run must log exactly the same episodes (every column but wall-clock time) and
end with bit-identical weights. Runs use ``SlowCartPole-v0`` (tests/cli_envs.py: CartPole
sleeping 2 ms per step) so that a run lasts a few seconds and can be killed in the middle.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pgtwin.train import checkpoints
from pgtwin.train.episode_log import read_episodes
from pgtwin.train.run import load_weights
from tests.cli_envs import train_to_its_failure

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPDATES = 30
RUN = ["--env", "tests.cli_envs:SlowCartPole-v0", "--impl", "eager", "--seed", "3",
       "--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--steps", str(16 * UPDATES),
       "--checkpoint-every", "3", "--deterministic", "--no-stop", "--no-progress"]


def _pgtwin(*argv) -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen([sys.executable, "-m", "pgtwin", "train", *argv], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return err


def _same_episodes(a_dir: str, b_dir: str) -> None:
    a = read_episodes(os.path.join(a_dir, "episodes.csv"))
    b = read_episodes(os.path.join(b_dir, "episodes.csv"))
    for col in ("episode", "update", "env_steps", "env_index", "return", "length"):
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)


def _same_weights(a_dir: str, b_dir: str) -> None:
    a = load_weights(os.path.join(a_dir, "weights.npz"))
    b = load_weights(os.path.join(b_dir, "weights.npz"))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def _rows(logdir: str) -> int:
    return len(read_episodes(os.path.join(logdir, "episodes.csv"))["episode"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Four processes, overlapped two at a time (each mostly spends its time importing TF):

    * ``reference``: an uninterrupted run;
    * ``killed``: the same run, SIGKILLed once it has checkpointed update 6, then resumed;
    * ``corrupt``: a copy of the finished reference whose newest checkpoint gets one bit
      flipped, then resumed.
    """
    root = tmp_path_factory.mktemp("reliability")
    ref, killed, corrupt = (str(root / name) for name in ("reference", "killed", "corrupt"))
    ref_proc = _pgtwin(*RUN, "--logdir", ref)
    proc = _pgtwin(*RUN, "--logdir", killed)
    deadline = time.monotonic() + 120
    while True:
        # Kill once update 6 is checkpointed and episodes beyond the newest checkpoint have
        # been logged: the resumed run will replay those, and must not log them twice.
        last = checkpoints.find_latest(os.path.join(killed, "checkpoints"))[0]
        if last is not None and last.update >= 6 and _rows(killed) > last.meta["episodes"]:
            break
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    after_kill = {
        "weights_written": os.path.exists(os.path.join(killed, "weights.npz")),
        "last": checkpoints.find_latest(os.path.join(killed, "checkpoints"))[0],
        "logged": _rows(killed),
        "seen": last.update,
    }
    resume_proc = _pgtwin("--resume", "--logdir", killed, "--no-progress")
    _finish(ref_proc)

    shutil.copytree(ref, corrupt)
    os.remove(os.path.join(corrupt, "weights.npz"))
    state = os.path.join(checkpoints.checkpoint_path(os.path.join(corrupt, "checkpoints"),
                                                     UPDATES), "state.json")
    data = bytearray(open(state, "rb").read())
    data[len(data) // 2] ^= 0x20
    open(state, "wb").write(bytes(data))
    corrupt_proc = _pgtwin("--resume", "--logdir", corrupt, "--no-progress")
    return {"reference": ref, "killed": killed, "corrupt": corrupt, "after_kill": after_kill,
            "killed_err": _finish(resume_proc), "corrupt_err": _finish(corrupt_proc)}


@pytest.mark.slow
def test_sigkill_then_resume_equals_an_uninterrupted_run(runs):
    after_kill, last = runs["after_kill"], runs["after_kill"]["last"]
    # Killed mid-run: it never reached the end, where weights.npz is written.
    assert not after_kill["weights_written"]
    assert after_kill["seen"] <= last.update < UPDATES
    assert after_kill["logged"] > last.meta["episodes"]  # episodes after it get replayed
    assert (f"resuming {last.path} exactly (env state restored): update {last.update}"
            in runs["killed_err"])
    _same_episodes(runs["reference"], runs["killed"])  # no episode lost or logged twice
    _same_weights(runs["reference"], runs["killed"])


@pytest.mark.slow
def test_a_corrupted_checkpoint_is_refused_and_the_previous_one_used(runs):
    run, err = runs["corrupt"], runs["corrupt_err"]
    newest = checkpoints.checkpoint_path(os.path.join(run, "checkpoints"), UPDATES)
    assert f"refusing checkpoint {newest}: file state.json fails its sha256 check" in err
    assert f"moved it to {newest}.corrupt" in err
    previous = checkpoints.checkpoint_path(os.path.join(run, "checkpoints"), UPDATES - 3)
    assert f"using the previous good checkpoint {previous}" in err
    _same_episodes(runs["reference"], run)
    _same_weights(runs["reference"], run)


@pytest.mark.parametrize("env_id, what", [
    ("NaNObsCartPole-v0", "non-finite observation from env 2 at rollout step 1 (env-step 24)"),
    ("NaNRewardCartPole-v0", "non-finite reward nan from env 2 at rollout step 1 (env-step 24)"),
])
def test_nan_from_the_env_names_env_and_step_and_keeps_the_checkpoint(tmp_path, capsys, env_id,
                                                                      what):
    # tests/cli_envs.py: the sub-env reset with seed 2 (env index 2 under --seed 0) returns a
    # NaN on its 6th step call (index 5). With 4 envs x 4 steps per update, loop step 5 is
    # rollout step 1 of update 2, and the env-step counter after it is 4 * 6 = 24; update 1
    # was checkpointed.
    logdir = str(tmp_path / "run")
    code = train_to_its_failure(env_id, logdir)
    err = capsys.readouterr().err
    assert code == 1
    ckpt = checkpoints.checkpoint_path(os.path.join(logdir, "checkpoints"), 1)
    assert f"pgtwin train: error: {env_id} (eager) failed during update 2" in err
    assert what in err and f"the last checkpoint {ckpt} is intact" in err
    # the env's to fix, as for an env that raises: the fix and the command to go on
    assert f"is intact; fix the env (or wrap it to replace such values), then resume with: " \
        in err and f"--resume --logdir {logdir}" in err
    assert checkpoints.verify(ckpt).meta["env_steps"] == 16
    assert [u for u, _ in checkpoints.list_checkpoints(os.path.join(logdir, "checkpoints"))] == [1]


def test_an_env_that_raises_names_where_keeps_the_checkpoint_and_shows_its_traceback(tmp_path,
                                                                                     capsys):
    # The same schedule as the NaN test above: the sub-env of index 2 raises on its 6th step
    # call, rollout step 1 of update 2; update 1 was checkpointed.
    logdir = str(tmp_path / "run")
    code = train_to_its_failure("RaisingCartPole-v0", logdir)
    err = capsys.readouterr().err
    assert code == 1
    ckpt = checkpoints.checkpoint_path(os.path.join(logdir, "checkpoints"), 1)
    message = err[err.index("pgtwin train: error:"):]
    assert message.startswith("pgtwin train: error: RaisingCartPole-v0 (eager) failed during "
                              "update 2: env 2 raised RuntimeError at rollout step 1"), message
    assert "tests/cli_envs.py:" in message and "simulator crashed at call 5" in message
    assert f"the last checkpoint {ckpt} is intact; fix the env, then resume with: " in message
    # the env's own traceback comes first, ending at its raise
    trace = err[:err.index("pgtwin train: error:")]
    assert trace.startswith("Traceback") and trace.rstrip().endswith(
        "RuntimeError: simulator crashed at call 5")
