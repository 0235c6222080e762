"""The harness on the three examples of old TF1 code (examples/*/programs.py), as a user runs it.

Each example module declares its faithful migrations (``FAITHFUL``: every rung must pass,
in every dtype of ``DTYPES``) and its wrong ones (``WRONG_MIGRATIONS``: the rung that must
catch each, from the mistake made on purpose; "initialisation" with ``init="fail"``, since
that rung only warns by default).
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from pgtwin.parity.code_parity import compare_programs

EXAMPLES = ("tf1_agent_class", "tf1_notebook", "tf1_actor_critic")
#: What the first failing row must say, by wrong factory: the fix for the mistake made.
EXPECTED_NOTES = {
    "tf2_keras_epsilon": "write epsilon=1e-8",
    "tf2_tf_keras_epsilon": "write epsilon=1e-8",
    "tf2_glorot_init": "give the TF2 layer the TF1 initializer",
    "tf2_default_init": "give the TF2 layer the TF1 initializer",
    "tf2_numpy_log_probs": "DisconnectedGradientError on the eager side",
    "tf2_from_logits_default": "Pass from_logits=True",
    "tf2_double_softmax": "a softmax applied twice",
    "tf2_sum_loss": "64x the TF1 loss",  # the committed batch holds 64 samples
    "tf2_head_only": "did not change this variable",
}


def _module(name):
    return importlib.import_module(f"examples.{name}.programs")


def _batch(name):
    with np.load(f"examples/{name}/batch.npz") as data:
        return {k: data[k] for k in data.files}


FAITHFUL_CASES = [(ex, factory, dtype) for ex in EXAMPLES for factory in _module(ex).FAITHFUL
                  for dtype in _module(ex).DTYPES]
WRONG_CASES = [(ex, factory, rung) for ex in EXAMPLES
               for factory, rung in _module(ex).WRONG_MIGRATIONS.items()]


@pytest.mark.parametrize("example, factory, dtype", FAITHFUL_CASES)
def test_a_faithful_migration_passes_every_rung_with_the_users_own_code(example, factory, dtype):
    module = _module(example)
    batch = module.make_batch(0) if dtype == "float32" else _batch(example)
    report = compare_programs(module.tf1(dtype), getattr(module, factory)(dtype), batch,
                              steps=3)
    assert report.ok, report.to_table()
    assert {"variables", "outputs" if module.tf1().outputs else "loss", "loss", "gradients",
            "weights"} <= {r.rung for r in report.rows}
    assert not report.warnings, report.to_table()


@pytest.mark.parametrize("example, factory, rung", WRONG_CASES)
def test_a_wrong_migration_is_caught_at_its_rung_with_a_message(example, factory, rung):
    module = _module(example)
    report = compare_programs(module.tf1(), getattr(module, factory)(), _batch(example),
                              steps=3, init="fail")
    bad = report.first_failure
    assert bad is not None, report.to_table()
    assert bad.rung == rung, report.to_table()
    assert EXPECTED_NOTES[factory] in bad.note, report.to_table()
