"""A run directory that cannot be written (issue 17, item 5) and two smaller checkpoint
defects (item 10): refusals and failures are one message naming the path and what is
intact, exit 1, no traceback.

Root ignores file modes, so a read-only file system is simulated where the OS would
report it (the probe's ``mkstemp`` raising EROFS); the other failures are real: a logdir
under a regular file (ENOTDIR), an episode log on ``/dev/full`` (ENOSPC), and TensorFlow's
own ``ResourceExhaustedError`` from a checkpoint write.
"""
from __future__ import annotations

import errno
import os
import stat

from pgtwin.train import checkpoints, run_checkpoint, run_storage
from pgtwin.cli import main

TINY = ["--env", "CartPole-v1", "--num-envs", "2", "--num-steps", "8", "--hidden", "8",
        "--no-progress"]


def _train(capsys, *argv) -> tuple[int, str]:
    code = main(["train", *argv])
    return code, capsys.readouterr().err


def _read_only(monkeypatch):
    def refuse(*args, dir=None, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), dir)
    monkeypatch.setattr(run_storage.tempfile, "mkstemp", refuse)


def test_a_read_only_logdir_is_refused_before_training(tmp_path, capsys, monkeypatch):
    logdir = str(tmp_path / "run")
    _read_only(monkeypatch)
    code, err = _train(capsys, *TINY, "--steps", "32", "--logdir", logdir)
    assert code == 1
    assert (f"pgtwin train: error: the run directory is not writable: cannot write {logdir}: "
            "Read-only file system; nothing was written: choose a writable --logdir") in err
    assert "Traceback" not in err and os.listdir(logdir) == []


def test_a_logdir_under_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "plain").write_text("not a directory")
    logdir = str(tmp_path / "plain" / "run")
    code, err = _train(capsys, *TINY, "--steps", "32", "--logdir", logdir)
    assert code == 1
    assert "the run directory is not writable: cannot write" in err and "Not a directory" in err


def test_resume_into_a_read_only_logdir_keeps_the_checkpoints(tmp_path, capsys, monkeypatch):
    logdir = str(tmp_path / "run")
    assert _train(capsys, *TINY, "--steps", "32", "--checkpoint-every", "1", "--logdir", logdir)[0] == 0
    before = checkpoints.list_checkpoints(os.path.join(logdir, "checkpoints"))
    _read_only(monkeypatch)
    code, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "64", "--no-progress")
    assert code == 1
    assert f"cannot write {logdir}: Read-only file system; its checkpoints are untouched" in err
    assert checkpoints.list_checkpoints(os.path.join(logdir, "checkpoints")) == before


def test_a_full_disk_under_the_episode_log_is_one_message(tmp_path, capsys):
    logdir = tmp_path / "run"
    logdir.mkdir()
    os.symlink("/dev/full", logdir / "episodes.csv")  # every write: ENOSPC
    code, err = _train(capsys, *TINY, "--steps", "32", "--logdir", str(logdir))
    assert code == 1
    assert (f"pgtwin train: error: CartPole-v1 (eager) could not write {logdir}/episodes.csv "
            "after update 0 (env-step 0): No space left on device; no checkpoint had been "
            "written") in err, err
    assert "then start the run again" in err
    assert "Traceback" not in err


def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, capsys, monkeypatch):
    import tensorflow as tf

    logdir = str(tmp_path / "run")
    root = os.path.join(logdir, "checkpoints")
    save, calls = run_checkpoint.save, []

    def save_then_fill_the_disk(directory, *args):
        calls.append(directory)
        if len(calls) == 2:  # the checkpoint of update 2: TF reports the full disk
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{directory}/agent/ckpt.data-00000-of-00001.tempstate; "
                            "No space left on device")
        return save(directory, *args)

    monkeypatch.setattr(run_checkpoint, "save", save_then_fill_the_disk)
    code, err = _train(capsys, *TINY, "--steps", "64", "--checkpoint-every", "1",
                       "--logdir", logdir)
    assert code == 1
    first = checkpoints.checkpoint_path(root, 1)
    assert (f"could not write {checkpoints.checkpoint_path(root, 2)} after update 2 "
            "(env-step 32):") in err
    assert "No space left on device" in err
    assert f"the last checkpoint {first} is intact" in err
    assert f"then resume with: pgtwin train --resume --logdir {logdir}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(root)) == ["update_00000001"]  # no half-written checkpoint
    monkeypatch.setattr(run_checkpoint, "save", save)
    code, err = _train(capsys, "--resume", "--logdir", logdir, "--no-progress")
    assert code == 0 and f"resuming {first}" in err


def test_checkpoint_directories_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        ckpt = checkpoints.write_checkpoint(str(tmp_path), 3, lambda d: None)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(ckpt.path).st_mode) == 0o755  # 0o777 & ~0o022, not 0o700


def test_a_second_resume_names_the_checkpoints_set_aside(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    root = os.path.join(logdir, "checkpoints")
    assert _train(capsys, *TINY, "--steps", "32", "--checkpoint-every", "1", "--logdir", logdir)[0] == 0
    for _, path in checkpoints.list_checkpoints(root):
        os.remove(os.path.join(path, "state.json"))
    code, err = _train(capsys, "--resume", "--logdir", logdir, "--no-progress")
    assert code == 1 and err.count("moved it to") == 2  # first resume: both set aside
    code, err = _train(capsys, "--resume", "--logdir", logdir, "--no-progress")
    assert code == 1
    assert "(none was written)" not in err
    assert (f"no usable checkpoint in {root}: 2 were set aside as unusable by an earlier "
            "resume (update_00000001.corrupt, update_00000002.corrupt)") in err
