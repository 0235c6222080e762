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
