"""Rung 6: the same training run, 20 updates of collect + update, in both twins.

Each twin runs ``pgtwin_core.loop.iterate_training`` on its own envs, seeded the same, with its
own generator from the same seed. float64: the trajectories must be identical for all 20
updates and the end weights within 1e-8. float32: the first rollout (identical weights) must
agree; after that the runs may part, and the update where they did is reported.
"""
from __future__ import annotations

import re

import pytest

from pgtwin.parity.twin_parity import POLICY_KINDS, TRAINING_ATOL_FLOAT64, run_ladder

from parity_tests.test_twin_ladder import without_xla

UPDATES = 20


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("kind", tuple(POLICY_KINDS))
def test_rung6_same_training_run(kind, dtype, record_property):
    report = run_ladder(kind, dtype, rungs=("training",), training_updates=UPDATES,
                        config_changes=without_xla(kind, dtype))
    rows = {r.item: r for r in report.rows}
    trajectory = rows["trajectory"]
    record_property("trajectory", trajectory.note)
    weights = [rows[name] for name in POLICY_KINDS[kind].spec().weight_shapes()]
    if dtype == "float64":
        assert trajectory.note == f"identical for all {UPDATES} updates", report.to_table()
        assert all(r.max_abs <= TRAINING_ATOL_FLOAT64 for r in weights), report.to_table()
    else:
        parted = re.search(r"parted at update (\d+)", trajectory.note)
        assert parted is None or int(parted.group(1)) > 1, report.to_table()
    assert report.ok, report.to_table()
