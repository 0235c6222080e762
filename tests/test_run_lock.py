"""One writer per run directory (issue 17, item 6): ``pgtwin train`` holds ``LOGDIR/.lock``
for its lifetime; a second writer is refused naming the owner's pid; the lock goes with
its process however that ends, and a dead owner's record is reported as stale.

The owners here are child processes: a flock is per open file, so a lock held by another
process is what a second ``pgtwin train`` would meet.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import tests.cli_envs  # noqa: F401  (registers the test envs)
from pgtwin.cli import main
from pgtwin.train.run_lock import RunLock, RunLockError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--no-progress"]
HOLD = ("import sys, time; from pgtwin.train.run_lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('locked', flush=True); time.sleep(120)")


def _holder(logdir: str) -> subprocess.Popen:
    """A child process that takes the lock of ``logdir`` and sleeps."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, logdir], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_lock_is_refused_naming_the_owner(tmp_path):
    proc = _holder(str(tmp_path))
    try:
        with pytest.raises(RunLockError) as info:
            RunLock(str(tmp_path)).acquire()
        assert f"{tmp_path} is in use by process {proc.pid} on " in str(info.value)
        assert "choose another --logdir" in str(info.value)
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_owner_leaves_a_stale_record_that_is_taken_over(tmp_path):
    proc = _holder(str(tmp_path))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lock = RunLock(str(tmp_path)).acquire()
    try:
        assert lock.stale_owner["pid"] == proc.pid
        assert f"taking over the lock of process {proc.pid}" in lock.stale_message()
    finally:
        lock.release()
    again = RunLock(str(tmp_path)).acquire()  # a clean release leaves no record behind
    assert again.stale_owner is None
    again.release()


def test_train_into_a_locked_logdir_is_refused_before_any_work(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    os.makedirs(logdir)
    proc = _holder(logdir)
    try:
        code = main(["train", "--env", "CartPole-v1", "--steps", "32", "--logdir", logdir, *TINY])
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err
    assert code == 1
    assert f"pgtwin train: error: {logdir} is in use by process {proc.pid}" in err
    assert sorted(os.listdir(logdir)) == [".lock"]  # nothing written


def test_resume_while_the_run_is_still_going_is_refused(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgtwin", "train", "--env", "tests.cli_envs:SlowCartPole-v0",
         "--steps", "100000", "--checkpoint-every", "1", "--logdir", logdir, *TINY],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not os.path.isdir(os.path.join(logdir, "checkpoints", "update_00000001")):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        code = main(["train", "--resume", "--logdir", logdir, "--no-progress"])
        err = capsys.readouterr().err
        assert code == 1
        assert f"{logdir} is in use by process {proc.pid}" in err
        assert proc.poll() is None  # the first run goes on undisturbed
    finally:
        proc.kill()
        proc.communicate()
    # killed: its lock went with it, so the resume now goes ahead (and says so)
    code = main(["train", "--resume", "--logdir", logdir, "--steps", "64", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"taking over the lock of process {proc.pid} on " in err
    assert "which is no longer running (it crashed or was killed)" in err


def test_the_lock_is_released_when_a_run_fails(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code = main(["train", "--env", "tests.cli_envs:NaNObsCartPole-v0", "--num-envs", "4",
                 "--num-steps", "4", "--hidden", "8", "--steps", "400", "--logdir", logdir,
                 "--no-progress"])
    assert code == 1
    lock = RunLock(logdir).acquire()  # free, and no stale record: it was released
    assert lock.stale_owner is None
    lock.release()
