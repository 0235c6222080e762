"""``pgtwin demo`` end to end on a short budget (slow: it builds four agents and runs the
parity ladder). In float64 the twins agree to ~1e-15, so over a few updates the two runs
sample the same actions: their episode logs must be identical, which checks the twins
against each other, not against the demo's own numbers.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pgtwin.cli import main
from pgtwin.cli.commands.demo import timing_lines
from pgtwin.train.run import RunResult
from pgtwin.train.settings import defaults_for
from pgtwin.train.episode_log import read_episodes


@pytest.mark.slow
def test_demo_runs_both_twins_and_their_runs_coincide(tmp_path, capsys):
    logdir = str(tmp_path / "demo")
    # The demo trains with the CartPole defaults: N x T env steps per update; budget 3 updates.
    row = defaults_for("CartPole-v1")
    steps = 3 * row.config.batch_size
    code = main(["demo", "--steps", str(steps), "--dtype", "float64", "--logdir", logdir,
                 "--json", "--no-progress"])
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and summary["parity_ok"] is True
    assert "parity OK" in err and "gradients" in err and "graph / eager env-steps per second" in err
    assert "after the first iteration" in err and "first iteration" in err
    for impl in ("graph", "eager"):
        assert summary["runs"][impl]["updates"] == 3 and summary["runs"][impl]["env_steps"] == steps
    graph = read_episodes(os.path.join(logdir, "graph", "episodes.csv"))
    eager = read_episodes(os.path.join(logdir, "eager", "episodes.csv"))
    assert len(graph["episode"]) > 100
    for col in ("env_steps", "env_index", "return", "length"):
        np.testing.assert_array_equal(graph[col], eager[col])
    assert summary["runs_part_at_episode"] is None
    assert summary["png"] == os.path.join(logdir, "learning_curves.png")
    assert open(summary["png"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert f"learning curves: {summary['png']}" in err


def _earlier_demo(logdir: str) -> None:
    """What an earlier demo leaves: a run (its run.json) under graph/ and eager/."""
    for impl in ("graph", "eager"):
        os.makedirs(os.path.join(logdir, impl))
        with open(os.path.join(logdir, impl, "run.json"), "w") as f:
            f.write("{}")


def test_a_second_demo_into_the_same_logdir_is_refused_before_any_work(tmp_path, capsys):
    logdir = str(tmp_path / "demo")
    _earlier_demo(logdir)
    with pytest.raises(SystemExit) as info:
        main(["demo", "--logdir", logdir, "--no-progress"])
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert (f"pgtwin demo: error: {logdir}/graph already holds a run (an earlier demo's): pass "
            f"--overwrite to replace the demo's runs in {logdir}, or choose another --logdir") in err
    assert "[1/3]" not in out + err  # the parity ladder never started
    assert "Traceback" not in err


def test_overwrite_removes_the_earlier_runs(tmp_path):
    from pgtwin.cli.commands.demo import prepare_demo_logdir

    logdir = str(tmp_path / "demo")
    _earlier_demo(logdir)
    prepare_demo_logdir(logdir, overwrite=True)
    assert sorted(os.listdir(logdir)) == []


def _result(impl: str, env_steps: int, wall_s: float, first_s: float | None,
            first_steps: int | None) -> RunResult:
    return RunResult(env="CartPole-v1", impl=impl, seed=0, env_steps=env_steps, updates=8,
                     wall_s=wall_s, final_mean_return=None, solved=False,
                     solved_at_env_steps=None, solved_at_wall_s=None, threshold=500.0,
                     logdir="x", first_iteration_s=first_s, first_iteration_env_steps=first_steps)


def test_timing_separates_the_first_iteration_from_the_rate_after_it():
    # graph: 131,072 steps in 1.0 s, the first 16,384 in 0.1 s: after it 114,688 / 0.9 s =
    # 127,431 steps/s. eager: 2.0 s, its first iteration 1.2 s: 114,688 / 0.8 s = 143,360.
    # Over the run 131,072 / 131,072 * 2 = 2.00; after the first iteration 127,431 / 143,360 = 0.89.
    lines = timing_lines({"graph": _result("graph", 131072, 1.0, 0.1, 16384),
                          "eager": _result("eager", 131072, 2.0, 1.2, 16384)})
    assert "first iteration 0.10 s (tracing, XLA compiles), then   127431 steps/s" in lines[1]
    assert "first iteration 1.20 s (tracing, XLA compiles), then   143360 steps/s" in lines[3]
    assert lines[-1] == ("graph / eager env-steps per second: 2.00 over the run, 0.89 after "
                         "the first iteration")


def test_timing_of_a_run_of_one_iteration_has_no_rate_after_it():
    lines = timing_lines({"graph": _result("graph", 16384, 0.5, 0.5, 16384),
                          "eager": _result("eager", 16384, 1.0, 1.0, 16384)})
    assert len(lines) == 3 and "first iteration" not in " ".join(lines)
    assert lines[-1] == "graph / eager env-steps per second: 2.00"
