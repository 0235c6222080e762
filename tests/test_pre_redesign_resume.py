"""Run directories written before the redesign (issue 13) still resume to the weights of
the uninterrupted run.

tests/data/pre_redesign/{graph,eager} are CartPole-v1 runs (4 envs x 64 steps, hidden 8,
--deterministic) written by the tree of commit 17c0483 (the shared layer still named
``pgtwin_core``), stopped at 2048 env steps with their last checkpoint. The oracle
``*_weights_after_4096_steps.npz`` is that same tree's uninterrupted 4096-step run.

Those runs trained with ``baseline='none'`` when ``normalize_returns`` still centred the
returns (issue 15): what that tree called ``none`` is today's ``mean`` (``(G - mean) /
(std + eps)``, the same arithmetic), so the copy is renamed to ``mean`` before it resumes
(``as_todays_baseline``: the settings in ``run.json`` and each checkpoint's ``state.json``,
and that file's hash in the manifest).

The oracle is float32 weights written by another install: bit for bit where it was made,
but TensorFlow's float32 kernels round differently across versions and CPUs (a fresh
install of the pins, TF 2.21.0 / numpy 2.4.6 on an AMD EPYC, resumed to within 1 ulp:
1.2e-7 absolute). So the weights are held to ``ATOL``: 80x that, and 2,400x below what one
update moves them (a resume one update short misses by 0.024).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pgtwin.cli import main

DATA = Path(__file__).parent / "data" / "pre_redesign"
ATOL = 1e-5


def as_todays_baseline(logdir: Path) -> None:
    """Rename the copied run's ``baseline='none'`` (centred, before issue 15) to ``mean``."""
    run = json.loads((logdir / "run.json").read_text())
    assert run["config"]["baseline"] == "none"
    run["config"]["baseline"] = "mean"
    (logdir / "run.json").write_text(json.dumps(run))
    for state_path in logdir.glob("checkpoints/*/state.json"):
        state = json.loads(state_path.read_text())
        assert state["settings"]["config"]["baseline"] == "none"
        state["settings"]["config"]["baseline"] = "mean"
        data = json.dumps(state).encode()
        state_path.write_bytes(data)
        manifest_path = state_path.parent / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest["files"]["state.json"] = {"sha256": hashlib.sha256(data).hexdigest(),
                                           "size": len(data)}
        manifest_path.write_text(json.dumps(manifest))


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_a_run_written_before_the_redesign_resumes_to_the_uninterrupted_weights(
        tmp_path, impl, capsys):
    logdir = tmp_path / impl
    shutil.copytree(DATA / impl, logdir)
    as_todays_baseline(logdir)
    code = main(["train", "--env", "CartPole-v1", "--impl", impl, "--steps", "4096",
                 "--num-envs", "4", "--num-steps", "64", "--hidden", "8",
                 "--checkpoint-every", "2", "--deterministic", "--resume",
                 "--logdir", str(logdir), "--json"])
    assert code == 0, capsys.readouterr().err
    got = np.load(logdir / "weights.npz")
    want = np.load(DATA / f"{impl}_weights_after_4096_steps.npz")
    assert sorted(got.files) == sorted(want.files)
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=ATOL, err_msg=name)
