"""Twin vs twin: natural policy gradient steps (``natural_kl``) over several updates.

The solve is one numpy copy (``pgtwin_core.natural_gradient``, held to a dense oracle in
``tests/test_natural_gradient.py``); what differs between the twins is what it is fed: each
twin's per-sample scores (``analytic`` for an MLP, ``vectorized`` for the LSTM), its loss
gradient, and its SGD apply of the step. The value baseline (with GAE) adds the value net's
own fits between the steps. Both twins get the same spec, weights and batches.

Tolerances: float64 1e-9 relative. float32: 1e-4 of each item's largest entry after one
step; later steps precondition with Fisher matrices built on weights that already differ
by float32 rounding, and conjugate gradient carries that through 1/damping, so the
weights are compared at 1e-3 of their largest entry after three.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin.parity.ladder import ParityReport, compare_arrays
from pgtwin.twins import agent_class

from tests.per_sample_cases import KINDS, random_weights
from tests.synthetic_batches import random_batch

UPDATES = 3
RTOL = {"float64": 1e-9, "float32": 1e-4}
WEIGHTS_RTOL = {"float64": 1e-9, "float32": 1e-3}

CASES = [
    ("categorical_mlp", "float64", dict(baseline="mean")),
    ("categorical_mlp", "float32", dict(baseline="mean")),
    ("gaussian_mlp", "float64", dict(baseline="value", gae_lambda=0.9)),
    ("gaussian_mlp", "float32", dict(baseline="value", gae_lambda=0.9)),
    ("gaussian_lstm", "float64", dict(baseline="mean", entropy_coef=0.01)),
]


def _compare(report: ParityReport, rung: str, item: str, a, b, rtol: float, context: str):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), 1e-30)
    report.add(compare_arrays(rung, item, a, b, rtol, rtol * scale, context))


@pytest.mark.parametrize("kind,dtype,fields", CASES)
def test_natural_steps_agree_across_twins(kind, dtype, fields):
    spec = KINDS[kind]
    config = ReinforceConfig(dtype=dtype, optimizer="sgd", learning_rate=1.0,
                             natural_kl=0.01, gamma=0.95, num_envs=3, num_steps=20, **fields)
    weights = random_weights(spec, seed=5, dtype=dtype)
    graph, eager = (agent_class(impl)(spec, config, weights=weights) for impl in ("graph", "eager"))
    context = f"{kind} {dtype} {fields}"
    report = ParityReport()
    for step in range(UPDATES):
        batch = random_batch(spec, 20, 3, seed=10 + step)
        ma, mb = graph.update(batch), eager.update(batch)
        assert ma["applied"] and mb["applied"], (ma, mb)
        for key in ("loss", "grad_norm"):
            _compare(report, "loss", f"{key}@{step}", ma[key], mb[key], RTOL[dtype], context)
        # The line search made the same choice, and measured the same KL of it.
        assert ma["natural_fraction"] == mb["natural_fraction"], (ma, mb)
        _compare(report, "weights", f"natural_kl@{step}", ma["natural_kl"], mb["natural_kl"],
                 WEIGHTS_RTOL[dtype], context)
        rtol = RTOL[dtype] if step == 0 else WEIGHTS_RTOL[dtype]
        wa, wb = graph.get_weights(), eager.get_weights()
        for name in wa:
            _compare(report, "weights", f"{name}@{step}", wa[name] - weights[name],
                     wb[name] - weights[name], rtol, context)
    moved = max(float(np.max(np.abs(graph.get_weights()[n] - weights[n]))) for n in weights)
    assert moved > 1e-3, "the steps moved nothing: the comparison proves nothing"
    graph.close()
    eager.close()
    assert report.ok, report.to_table()
