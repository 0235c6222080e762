"""Skipped updates are counted by reason, explained once, and K in a row stop the run
(issue 17, item 2).

``tests.cli_envs:HugeRewardCartPole-v0`` pays 1e39 per step: finite in float64, so the
rollout accepts it, but past float32's largest value (3.4e38). With
``--no-normalize-returns`` the float32 advantages are infinite, the loss is not finite and
both twins' guarded apply skips every update (the weights stay the initial ones). The
episodic-baseline skip (no complete episode) is tests/test_cli_train.py's.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tests.cli_envs  # noqa: F401  (registers the test envs)
from pgtwin_core.envs import make_vec_env
from pgtwin_core.loop import NO_COMPLETE_EPISODE, NON_FINITE, skip_reason
from pgtwin_core.specs import init_weights, spec_for_env
from pgtwin.train import checkpoints
from pgtwin.cli import main
from pgtwin.train.skipped_updates import MAX_CONSECUTIVE_SKIPS
from pgtwin.train.run import RunSettings, load_weights

HUGE = ["--env", "tests.cli_envs:HugeRewardCartPole-v0", "--no-normalize-returns",
        "--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--no-progress", "--no-stop"]


def _train(capsys, *argv):
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1]) if code == 0 and "--json" in argv else None
    return code, summary, err


def test_skip_reason_from_metrics():
    assert skip_reason({"applied": True}) is None
    assert skip_reason({"applied": False, "loss": float("nan")}) == NON_FINITE
    assert skip_reason({"applied": False, "episodes": 0}) == NO_COMPLETE_EPISODE


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_non_finite_skips_are_counted_and_explained_once(tmp_path, capsys, impl):
    # 4 updates of 2 x 8 steps; the stop is switched off, so all 4 run and are skipped.
    code, summary, err = _train(capsys, *HUGE, "--impl", impl, "--steps", "64",
                                "--max-consecutive-skips", "0", "--logdir", str(tmp_path),
                                "--json")
    assert code == 0, err
    assert summary["updates"] == 4 and summary["skipped_updates"] == 4
    assert summary["skipped_by_reason"] == {NON_FINITE: 4}
    assert err.count("the loss or gradient was not finite") == 1, err
    assert "update 1: the loss or gradient was not finite" in err and "lower --lr" in err
    envs = make_vec_env("HugeRewardCartPole-v0", 2, 0)
    start = init_weights(spec_for_env(envs, "mlp", (8,)), 0, dtype="float32")
    envs.close()
    weights = load_weights(os.path.join(str(tmp_path), "weights.npz"))
    for name, w in start.items():  # nothing was applied
        np.testing.assert_array_equal(weights[name], w, err_msg=name)


def test_the_human_summary_says_how_many_and_why(tmp_path, capsys):
    code, _, _ = _train(capsys, *HUGE, "--steps", "32", "--max-consecutive-skips", "0",
                        "--logdir", str(tmp_path))
    out = capsys.readouterr()
    assert code == 0
    code = main(["train", "--resume", "--logdir", str(tmp_path), "--steps", "48",
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert ("3 of 3 updates skipped: 3 non finite (lower --lr" in out
            and "none was applied: the weights are the initial ones" in out), out


def test_k_consecutive_skips_stop_the_run_and_keep_the_checkpoint(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code, _, err = _train(capsys, *HUGE, "--steps", "1600", "--checkpoint-every", "2",
                          "--max-consecutive-skips", "3", "--logdir", logdir)
    assert code == 1
    # Updates 1, 2, 3 skipped: the run stops after update 3 (env-step 3 x 16 = 48); update 2
    # was checkpointed, update 3 was not (the stop comes before its checkpoint turn anyway).
    ckpt = checkpoints.checkpoint_path(os.path.join(logdir, "checkpoints"), 2)
    assert ("pgtwin train: error: HugeRewardCartPole-v0 (eager) stopped at update 3 "
            "(env-step 48): the last 3 updates were all skipped (3 non finite), so the run is "
            "not training: lower --lr") in err, err
    assert f"the last checkpoint {ckpt} is intact" in err
    assert "--max-consecutive-skips 0 never stops" in err
    assert "Traceback" not in err


def test_the_default_limit_stops_an_untrainable_run(tmp_path, capsys):
    steps = 16 * (MAX_CONSECUTIVE_SKIPS + 5)
    code, _, err = _train(capsys, *HUGE, "--steps", str(steps), "--checkpoint-every", "0",
                          "--logdir", str(tmp_path))
    assert code == 1
    assert f"stopped at update {MAX_CONSECUTIVE_SKIPS} " in err
    assert RunSettings("x", "eager", None, "").max_consecutive_skips == MAX_CONSECUTIVE_SKIPS


def test_the_limit_counts_skips_in_a_row_across_a_resume(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code, _, err = _train(capsys, *HUGE, "--steps", "32", "--checkpoint-every", "1",
                          "--max-consecutive-skips", "0", "--logdir", logdir)
    assert code == 0, err  # 2 updates, both skipped, checkpointed
    code, _, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "1600",
                          "--max-consecutive-skips", "3", "--no-progress")
    assert code == 1
    assert "stopped at update 3 (env-step 48): the last 3 updates were all skipped" in err


def test_a_negative_limit_is_an_argument_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", *HUGE, "--max-consecutive-skips", "-1", "--logdir", str(tmp_path)])
    assert info.value.code == 2
    assert "argument --max-consecutive-skips: must be an integer >= 0, got -1" in \
        capsys.readouterr().err
