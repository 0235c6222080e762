"""Checkpoint directories (atomic write, verification, fallback), env snapshots, the episode
log and the learning-curve mean: the pieces ``pgtwin train --resume`` is built from.

No TensorFlow here: the checkpoint writer is given plain files to store.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import RolloutState, collect
from pgtwin.train import checkpoints, env_snapshot
from pgtwin.train.checkpoints import CheckpointError
from pgtwin.train.episode_log import EpisodeLog, finished_episodes, read_episodes
from pgtwin.train.plots import trailing_mean
from tests.fixed_length_env import SPEC, fixed_length_vec, uniform_policy


def _fill(payload: bytes):
    def fill(d):
        os.makedirs(os.path.join(d, "agent"))
        with open(os.path.join(d, "agent", "weights.bin"), "wb") as f:
            f.write(payload)
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump({"payload": len(payload)}, f)
    return fill


def _write(root, update, payload=b"x" * 100, keep=2):
    return checkpoints.write_checkpoint(str(root), update, _fill(payload), {"update": update},
                                        keep=keep)


# ---------------------------------------------------------------------- writing
def test_write_names_verifies_and_keeps_the_newest(tmp_path):
    for update in (3, 6, 9):
        _write(tmp_path, update)
    assert [u for u, _ in checkpoints.list_checkpoints(str(tmp_path))] == [6, 9]
    ckpt = checkpoints.verify(checkpoints.checkpoint_path(str(tmp_path), 9))
    assert ckpt.update == 9 and ckpt.meta == {"update": 9}
    with open(os.path.join(ckpt.path, checkpoints.MANIFEST)) as f:
        files = json.load(f)["files"]
    assert sorted(files) == [os.path.join("agent", "weights.bin"), "state.json"]
    assert files[os.path.join("agent", "weights.bin")]["size"] == 100
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_a_failing_write_leaves_the_previous_checkpoint_and_no_debris(tmp_path):
    _write(tmp_path, 1)

    def broken(d):
        _fill(b"half")(d)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoints.write_checkpoint(str(tmp_path), 2, broken)
    assert [u for u, _ in checkpoints.list_checkpoints(str(tmp_path))] == [1]
    checkpoints.verify(checkpoints.checkpoint_path(str(tmp_path), 1))
    assert sorted(os.listdir(tmp_path)) == ["update_00000001"]


def test_a_write_killed_midway_is_invisible_and_cleaned(tmp_path):
    _write(tmp_path, 1)
    # What a SIGKILL during fill leaves: a temp dir with some files and no manifest.
    debris = tmp_path / ".tmp-update_00000002-abc"
    debris.mkdir()
    (debris / "state.json").write_text("{")
    assert [u for u, _ in checkpoints.list_checkpoints(str(tmp_path))] == [1]
    assert checkpoints.find_latest(str(tmp_path))[0].update == 1
    assert checkpoints.clean_temporaries(str(tmp_path)) == [str(debris)]
    assert not debris.exists()


def test_rewriting_an_update_replaces_it(tmp_path):
    _write(tmp_path, 4, b"old")
    _write(tmp_path, 4, b"new!")
    path = checkpoints.checkpoint_path(str(tmp_path), 4)
    checkpoints.verify(path)
    assert open(os.path.join(path, "agent", "weights.bin"), "rb").read() == b"new!"
    assert sorted(os.listdir(tmp_path)) == ["update_00000004"]


def test_keep_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep must be >= 1, got 0"):
        _write(tmp_path, 1, keep=0)


# ---------------------------------------------------------------------- refusing
def _newest(tmp_path):
    _write(tmp_path, 1)
    _write(tmp_path, 2)
    return checkpoints.checkpoint_path(str(tmp_path), 2)


def test_a_flipped_byte_is_refused_naming_the_file(tmp_path):
    path = _newest(tmp_path)
    target = os.path.join(path, "agent", "weights.bin")
    data = bytearray(open(target, "rb").read())
    data[50] ^= 0x01
    open(target, "wb").write(bytes(data))
    with pytest.raises(CheckpointError, match=r"update_00000002: file agent/weights.bin fails "
                                              r"its sha256 check \(corrupted\)"):
        checkpoints.verify(path)


def test_a_truncated_file_is_refused_naming_sizes(tmp_path):
    path = _newest(tmp_path)
    target = os.path.join(path, "agent", "weights.bin")
    with open(target, "r+b") as f:
        f.truncate(40)
    with pytest.raises(CheckpointError, match=r"file agent/weights.bin is 40 bytes but the "
                                              r"manifest says 100 \(truncated"):
        checkpoints.verify(path)


@pytest.mark.parametrize("damage, message", [
    (lambda p: os.remove(os.path.join(p, "manifest.json")), "has no manifest.json"),
    (lambda p: open(os.path.join(p, "manifest.json"), "w").write('{"files": '),
     "manifest.json is unreadable"),
    (lambda p: os.remove(os.path.join(p, "state.json")), "file state.json is missing"),
])
def test_missing_or_broken_pieces_are_refused(tmp_path, damage, message):
    path = _newest(tmp_path)
    damage(path)
    with pytest.raises(CheckpointError, match=message):
        checkpoints.verify(path)


def test_find_latest_falls_back_to_the_previous_good_one(tmp_path):
    path = _newest(tmp_path)
    with open(os.path.join(path, "state.json"), "a") as f:
        f.write(" ")
    ckpt, refused = checkpoints.find_latest(str(tmp_path))
    assert ckpt.update == 1
    assert [p for p, _ in refused] == [path]
    assert "file state.json is" in refused[0][1]
    aside = checkpoints.set_aside(path)
    assert aside == path + ".corrupt" and os.path.isdir(aside)
    assert [u for u, _ in checkpoints.list_checkpoints(str(tmp_path))] == [1]


def test_no_good_checkpoint_lists_every_refusal(tmp_path):
    _write(tmp_path, 1)
    _write(tmp_path, 2)
    for _, path in checkpoints.list_checkpoints(str(tmp_path)):
        os.remove(os.path.join(path, "manifest.json"))
    ckpt, refused = checkpoints.find_latest(str(tmp_path))
    assert ckpt is None and len(refused) == 2


# ---------------------------------------------------------------------- env snapshots
@pytest.mark.parametrize("env_id, history", [("CartPole-v1", 1), ("Pendulum-v1", 3),
                                             ("BatteryArbitrage-v0", 1)])
def test_a_restored_env_steps_on_exactly_like_the_original(env_id, history):
    envs = make_vec_env(env_id, 3, seed=5, history=history)
    envs.reset(seed=5)
    actions = [envs.action_space.sample() for _ in range(230)]  # crosses episode ends
    for a in actions[:30]:
        envs.step(a)
    copy = env_snapshot.restore(env_snapshot.snapshot(envs),
                                make_vec_env(env_id, 3, seed=5, history=history))
    assert copy is not envs
    # Oracle: the original env itself, continuing with the same actions.
    for a in actions[30:]:
        want, got = envs.step(a), copy.step(a)
        for w, g in zip(want[:4], got[:4]):
            np.testing.assert_array_equal(w, g)


def test_a_snapshot_of_another_env_is_refused():
    envs = make_vec_env("CartPole-v1", 2, seed=0)
    with pytest.raises(env_snapshot.EnvSnapshotError, match=r"'CartPole-v1' x 2, but the run "
                                                            r"uses 'CartPole-v1' x 3"):
        env_snapshot.restore(env_snapshot.snapshot(envs), make_vec_env("CartPole-v1", 3))


def test_an_async_env_cannot_be_snapshotted():
    envs = make_vec_env("CartPole-v1", 1, seed=0, vectorization="async")
    try:
        with pytest.raises(env_snapshot.EnvSnapshotError, match="cannot snapshot env 'CartPole-v1'"):
            env_snapshot.snapshot(envs)
    finally:
        envs.close()


# ---------------------------------------------------------------------- episode log
def test_episode_rows_by_hand():
    # Env 0 runs 2-step episodes, env 1 3-step ones (NEXT_STEP autoreset: one reset step
    # after each). Valid steps: env 0 at t = 0, 1, [2 resets], 3, 4; env 1 at t = 0, 1, 2.
    # Episodes end at (t=1, env 0), (t=2, env 1), (t=4, env 0); with N = 2 the counter after
    # step t is 2 (t + 1), so they end at env-steps 4, 6, 10.
    envs = fixed_length_vec(lengths=(2, 3))
    state = RolloutState.start(envs, seed=0)
    batch, _ = collect(envs, uniform_policy, SPEC, 5, np.random.default_rng(0), state)
    rows = finished_episodes(batch, update=7, wall_s=1.23456, first=10)
    assert rows == [(10, 7, 4, 0, 2.0, 2, 1.2346), (11, 7, 6, 1, 3.0, 3, 1.2346),
                    (12, 7, 10, 0, 2.0, 2, 1.2346)]


def test_episode_log_round_trip_and_resume_truncation(tmp_path):
    path = str(tmp_path / "episodes.csv")
    log = EpisodeLog(path)
    returns = [0.1 + 0.2, 1 / 3, 500.0, -1e-300]  # exact float64 round trip via repr
    log.append([(i, 1, 10 * i, i % 2, r, i + 1, 0.5) for i, r in enumerate(returns)])
    log.close()
    with open(path, "a") as f:
        f.write("4,2,40,0,7.5")  # a row cut short by a kill
    back = read_episodes(path)
    assert back["return"].tolist() == returns and back["episode"].tolist() == [0, 1, 2, 3]

    log = EpisodeLog(path, keep=2)  # the checkpoint had counted 2 episodes
    log.append([(2, 2, 99, 1, 9.0, 9, 0.9)])
    log.close()
    back = read_episodes(path)
    assert back["episode"].tolist() == [0, 1, 2]
    assert back["return"].tolist() == [returns[0], returns[1], 9.0]


def test_resuming_a_log_shorter_than_the_checkpoint_is_an_error(tmp_path):
    path = str(tmp_path / "episodes.csv")
    log = EpisodeLog(path)
    log.append([(0, 1, 10, 0, 1.0, 1, 0.1)])
    log.close()
    with pytest.raises(ValueError, match="holds 1 complete episodes but the checkpoint counted 3"):
        EpisodeLog(path, keep=3)


def test_trailing_mean_against_a_loop():
    x = np.random.default_rng(0).normal(size=57)
    want = [np.mean(x[max(0, i - 9):i + 1]) for i in range(57)]
    np.testing.assert_allclose(trailing_mean(x, 10), want, rtol=1e-12)


def test_an_old_checkpoint_that_cannot_be_deleted_is_named_not_silent(tmp_path, monkeypatch):
    import shutil
    import warnings

    from pgtwin.train import checkpoints as ck

    root = str(tmp_path)
    for update in (1, 2, 3):
        ck.write_checkpoint(root, update, lambda d: open(os.path.join(d, "x"), "w").close(), {},
                            keep=None)
    real = shutil.rmtree

    def failing(path, onerror=None, **kw):  # the OS refuses, as on a read-only mount
        onerror(os.remove, os.path.join(path, "x"), (OSError, OSError(30, "Read-only"), None))

    monkeypatch.setattr(shutil, "rmtree", failing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ck.prune(root, keep=1)
    monkeypatch.setattr(shutil, "rmtree", real)
    messages = [str(w.message) for w in caught if issubclass(w.category, ck.CheckpointCleanupWarning)]
    assert len(messages) == 2  # updates 1 and 2
    assert "update_00000001" in messages[0] and "Read-only" in messages[0]
    assert "stays on disk" in messages[0]


def test_a_prune_killed_midway_leaves_no_half_deleted_checkpoint(tmp_path, monkeypatch):
    # Ctrl-C while rmtree deleted update 1's files used to leave update_00000001 without its
    # manifest, which a resume then refused as corrupt (and kept). The old checkpoint is
    # renamed out of the checkpoints' names before any file of it goes.
    import shutil

    from pgtwin.train import checkpoints as ck

    _write(tmp_path, 1)
    _write(tmp_path, 2)

    def interrupted(path, onerror=None, **kw):
        os.remove(os.path.join(path, "old", ck.MANIFEST))  # one file gone, then the signal
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ck.prune(str(tmp_path), keep=1)
    monkeypatch.undo()
    assert [u for u, _ in ck.list_checkpoints(str(tmp_path))] == [2]
    assert ck.find_latest(str(tmp_path))[1] == []  # nothing refused
    debris = [n for n in os.listdir(tmp_path) if n.startswith(".tmp-pruned-update_00000001")]
    assert len(debris) == 1
    assert ck.clean_temporaries(str(tmp_path)) == [str(tmp_path / debris[0])]
    assert sorted(os.listdir(tmp_path)) == ["update_00000002"]


def test_what_an_earlier_prune_could_not_delete_is_tried_again(tmp_path, monkeypatch):
    import shutil
    import warnings

    from pgtwin.train import checkpoints as ck

    _write(tmp_path, 1)
    _write(tmp_path, 2)
    monkeypatch.setattr(shutil, "rmtree", lambda path, onerror=None, **kw: onerror(
        os.remove, path, (OSError, OSError(30, "Read-only"), None)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.CheckpointCleanupWarning)
        ck.prune(str(tmp_path), keep=1)
    monkeypatch.undo()
    assert any(n.startswith(".tmp-pruned-") for n in os.listdir(tmp_path))
    _write(tmp_path, 3)  # its prune (keep 2) deletes update 1's leftover too
    assert sorted(os.listdir(tmp_path)) == ["update_00000002", "update_00000003"]
