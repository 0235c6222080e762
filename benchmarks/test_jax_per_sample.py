"""Per-sample gradients against what users would pick instead: JAX's ``jit(vmap(grad))``.

Runs only where JAX is installed (the optional ``jax`` extra; never a test dependency):
without it the module is skipped at collection.

Groups ``per-sample vs JAX: B=<n>`` (B = 32, 256, 2048), CartPole MLP (64, 64), float32,
one set of numpy weights (``init_weights(spec, SEED)``) and one batch for every entry:
``jax per-sample`` (the group's reference: ``benchmarks/jax_per_sample.py``), ``jax
aggregated`` (JAX's one gradient of the REINFORCE loss), then for each twin (``graph``: the
TF1 Session twin, ``eager``: the eager twin's ``tf.function``s) its fastest aggregated
gradient (``benchmarks/test_per_sample.aggregated``), the three ``per_sample_gradients``
methods through the agent's public method, and ``write_floor`` / ``write_floor_rows``
(returning arrays of the gradients' shapes, nothing computed: ``test_per_sample.write_floor``).
Every entry is numpy in, numpy out. Each timed result is first checked against JAX's to
float32 tolerance, so every entry computes the same numbers. ``loop`` at B = 2048 is one
round, as in ``test_per_sample.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from benchmarks import jax_per_sample  # noqa: E402  (imports JAX)
from benchmarks.conftest import SEED, agent_for  # noqa: E402
from benchmarks.test_per_sample import (aggregated, inputs, warmed_and_timed,  # noqa: E402
                                         write_floor)
from pgtwin_core.specs import init_weights  # noqa: E402

KIND = "categorical_mlp"
SIZES = (32, 256, 2048)
TWIN_ENTRIES = ("aggregated", "loop", "vectorized", "analytic", "write_floor", "write_floor_rows")
CASES = ([(size, "jax", entry) for size in SIZES for entry in ("per_sample", "aggregated")]
         + [(size, twin, entry) for size in SIZES for twin in ("graph", "eager")
            for entry in TWIN_ENTRIES])
CASES.sort(key=lambda case: SIZES.index(case[0]))  # one group after the other
RTOL = 1e-4
"""float32: relative to each weight's largest per-sample gradient (summation order differs)."""


def same_weights(spec):
    """The numpy weights every entry starts from: the benchmark agents' own."""
    return init_weights(spec, SEED, dtype="float32")


def batch(spec, size: int):
    """``(obs, actions, advantages, weights)``: the benchmark batch of ``test_per_sample``,
    with advantages 1 and weights 1/B (the aggregated gradient then averages the scores)."""
    obs, actions = inputs(spec, "float32", size)
    return obs, actions, np.ones(size, np.float32), np.full(size, 1.0 / size, np.float32)


def assert_same(got: dict, want: dict, what: str) -> None:
    """Every weight's array equal to ``want``'s to float32 tolerance (scaled by its size)."""
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for name, w in want.items():
        np.testing.assert_allclose(np.asarray(got[name]), w, rtol=RTOL,
                                   atol=RTOL * float(np.max(np.abs(w))), err_msg=f"{what}: {name}")


_JAX: dict[str, object] = {}


def jax_functions(spec):
    """JAX's two functions and the weights on its device, built once."""
    if not _JAX:
        _JAX.update(per_sample=jax_per_sample.per_sample_gradients(spec),
                    aggregated=jax_per_sample.aggregated_gradient(spec),
                    weights=jax_per_sample.device_weights(same_weights(spec)))
    return _JAX


@pytest.mark.parametrize("batch_size,twin,entry", CASES)
def test_per_sample_vs_jax(benchmark, batch_size, twin, entry):
    a = agent_for("graph" if twin == "graph" else "function", KIND)
    spec = a.spec
    obs, actions, adv, w = batch(spec, batch_size)
    jx = jax_functions(spec)
    actions32 = actions.astype(np.int32)
    jax_per_sample_ref = jx["per_sample"](jx["weights"], obs, actions32)
    benchmark.group = f"per-sample vs JAX: B={batch_size}"
    benchmark.extra_info.update(label=f"{twin} {entry}", twin=twin, entry=entry,
                                batch_size=batch_size)
    names = list(spec.weight_shapes())
    if twin == "jax":
        fn = jx[entry]
        call = ((lambda: fn(jx["weights"], obs, actions32)) if entry == "per_sample"
                else (lambda: fn(jx["weights"], obs, actions32, adv, w)))
    elif entry == "aggregated":
        fn = aggregated(a)
        call = lambda: dict(zip(names, fn(obs, actions, adv, w)))  # noqa: E731
    elif entry in ("write_floor", "write_floor_rows"):
        fn = write_floor(a, rows=entry == "write_floor_rows")
        call = lambda: fn(obs, actions)  # noqa: E731
    else:
        call = lambda: a.per_sample_gradients(obs, actions, entry)  # noqa: E731
    out = warmed_and_timed(benchmark, a, entry, call, obs, actions)
    if entry in ("write_floor", "write_floor_rows"):
        assert [g.shape for g in out] == [(batch_size, *s) for s in spec.weight_shapes().values()]
    elif entry == "aggregated":
        # -sum_i (1/B) * 1 * grad log pi_i: minus JAX's per-sample gradients' mean.
        assert_same(out, {n: -g.mean(axis=0) for n, g in jax_per_sample_ref.items()},
                    f"{twin} aggregated")
    else:  # ``loop`` with benchmarks disabled: its first rows only (``warmed_and_timed``)
        rows = len(next(iter(out.values())))
        assert_same(out, {n: g[:rows] for n, g in jax_per_sample_ref.items()}, f"{twin} {entry}")
