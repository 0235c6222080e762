"""Twin vs twin: per-sample gradients (every method), squared norms, and every optimal
baseline's gradient and weights after a few updates.

The per-sample math itself is one copy (``pgtwin.mode_agnostic.per_sample``, checked against
numpy in ``tests/test_mode_agnostic.py``); what these rows compare is what the twins do
differently around it: how the gradients are taken (``tf.gradients`` in the graph, a
``GradientTape`` in eager: the loop reference, pfor's one-sample gradient, the backward pass
at the pre-activations), how the ops are run (Session callables running a compiled function
in the graph against eager calls of ``tf.function(jit_compile=True)``, with bucket padding),
and how the variables are held and updated (the baselines' Adam steps and their memory of
earlier batches).

Both twins get the same spec, weights and batch (``tests.per_sample_cases``). Rows go through
``pgtwin.parity.ladder`` so a failure prints each item's max abs and max relative error.
Tolerances: float64 1e-9 relative; float32 1e-4 relative to each item's largest entry (a
per-sample gradient near zero carries float32 rounding of the larger ones around it).
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin.parity.ladder import ParityReport, compare_arrays
from pgtwin.twins import agent_class

from tests.per_sample_cases import KINDS, episodic_batch, random_inputs, random_weights

RTOL = {"float64": 1e-9, "float32": 1e-4}
UPDATES = 3


def compare(report: ParityReport, rung: str, item: str, a: np.ndarray, b: np.ndarray,
            dtype: str, context: str, atol_steps: float = 0.0) -> None:
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), 1e-30)
    atol = RTOL[dtype] * scale if dtype == "float32" else 0.0
    report.add(compare_arrays(rung, item, a, b, RTOL[dtype], atol + atol_steps, context))


def twins(spec, config, weights):
    return [agent_class(impl)(spec, config, weights=weights) for impl in ("graph", "eager")]


def _xla_alternating(cases: list[tuple], inner: int) -> list[tuple]:
    """``cases`` (an outer x inner product, ``inner`` items per outer one) each with
    ``jit_compile`` appended, on for every other inner item and shifted by one from outer
    item to outer item: each outer item meets XLA on half the inner ones, and each inner one
    on half the outer ones. XLA's compiles are about half a case's time; the other cases hold
    the twins to each other as ``jit_compile=False`` users run them."""
    return [(*case, (i + i // inner) % 2 == 0) for i, case in enumerate(cases)]


@pytest.mark.parametrize("kind,dtype,xla",
                         _xla_alternating([(k, d) for k in KINDS for d in ("float32", "float64")], 2))
def test_per_sample_gradients_agree_across_twins(kind, dtype, xla):
    spec = KINDS[kind]
    graph, eager = twins(spec, ReinforceConfig(dtype=dtype, jit_compile=xla), random_weights(spec))
    report = ParityReport()
    # One batch size (7: padded to its row bucket). tests/test_per_sample.py holds one twin's
    # methods to its own loop at B = 1, 7 and 256 for each kind and dtype (each twin meets
    # every kind there), so more sizes here would compile every method again in both twins.
    size = 7
    obs, actions = random_inputs(spec, size, seed=size)
    for method in ("loop", "vectorized", "analytic"):
        a = graph.per_sample_gradients(obs, actions, method=method)
        b = eager.per_sample_gradients(obs, actions, method=method)
        for name in a:
            compare(report, "gradients", f"{method}:{name}", a[name], b[name], dtype,
                    f"{kind} {dtype} B={size}")
    compare(report, "gradients", "sq_norms", graph.per_sample_sq_norms(obs, actions),
            eager.per_sample_sq_norms(obs, actions), dtype, f"{kind} {dtype} B={size}")
    graph.close()
    eager.close()
    assert report.ok, report.to_table()


BASELINE_CASES = [("categorical_mlp", "float64"), ("categorical_mlp", "float32"),
                  ("gaussian_mlp", "float64"), ("gaussian_lstm", "float64")]


@pytest.mark.parametrize("kind,dtype,baseline,xla", _xla_alternating(
    [(k, d, b) for k, d in BASELINE_CASES for b in ("optimal_scalar", "optimal_scalar_episodic",
                                                    "optimal_per_param", "optimal_time")], 4))
def test_every_baseline_agrees_across_twins(kind, dtype, baseline, xla):
    """Same gradient on a batch, then the same weights after ``UPDATES`` Adam steps; the
    episodic baselines also carry the same memory of earlier batches from update to update
    (``baseline_memory`` 0.8: updates 2 and 3 use it), and give the same gradient with it.
    Each case meets XLA on two baselines, and each baseline on two cases."""
    _baseline_agrees_across_twins(kind, dtype, baseline, jit_compile=xla)


@pytest.mark.parametrize("baseline,dtype,xla", [
    ("optimal_scalar_episodic", "float32", True), ("optimal_per_param", "float32", False),
    pytest.param("optimal_scalar_episodic", "float64", False, marks=pytest.mark.slow),
    pytest.param("optimal_per_param", "float64", True, marks=pytest.mark.slow)])
def test_shrunk_baselines_agree_across_twins(dtype, baseline, xla):
    """The same with ``baseline_shrinkage='auto'`` (its lambda from the other episodes;
    float64 slow: tests/test_shrinkage.py holds each twin to the numpy reference at 1e-10)."""
    _baseline_agrees_across_twins("categorical_mlp", dtype, baseline, baseline_shrinkage="auto",
                                  jit_compile=xla)


def _baseline_agrees_across_twins(kind: str, dtype: str, baseline: str, **config_fields) -> None:
    spec = KINDS[kind]
    config = ReinforceConfig(dtype=dtype, baseline=baseline, gamma=0.95, entropy_coef=0.01,
                             max_grad_norm=1.0, learning_rate=1e-2, num_envs=3, num_steps=20,
                             baseline_memory=0.8, **config_fields)
    graph, eager = twins(spec, config, random_weights(spec, seed=2))
    batches = [episodic_batch(spec, 20, 3, seed=s).batch for s in range(UPDATES)]
    report = ParityReport()
    context = f"{kind} {dtype} {baseline}"
    a, b = graph.gradients(batches[0]), eager.gradients(batches[0])
    for name in a:
        compare(report, "gradients", name, a[name], b[name], dtype, context)
    for step, batch in enumerate(batches):
        ma, mb = graph.update(batch), eager.update(batch)
        assert ma["applied"] and mb["applied"], (ma, mb)
        for key in ("loss", "grad_norm", "baseline"):
            compare(report, "weights", f"{key}@{step}", np.array(ma[key]), np.array(mb[key]),
                    dtype, context)
        if graph.baseline_memory is not None:
            sa, sb = graph.baseline_memory.state(), eager.baseline_memory.state()
            assert sa.keys() == sb.keys() == {"num", "den", "sum_r", "count"}, (sa, sb)
            for key in sa:
                compare(report, "training", f"memory.{key}@{step}", sa[key], sb[key], dtype,
                        context)
    if graph.baseline_memory is not None:  # a gradient read off the memory of 3 batches
        a, b = graph.gradients(batches[0]), eager.gradients(batches[0])
        for name in a:
            compare(report, "gradients", f"{name}@memory", a[name], b[name], dtype, context)
    wa, wb = graph.get_weights(), eager.get_weights()
    for name in wa:  # float32 Adam steps part by ~1e-5 of a step (pgtwin.parity.twin_parity)
        compare(report, "weights", name, wa[name], wb[name], dtype, context,
                atol_steps=RTOL[dtype] * UPDATES * config.learning_rate)
    graph.close()
    eager.close()
    assert report.ok, report.to_table()
