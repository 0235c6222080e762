"""Parity of the two update paths: ``cached`` (differentiate the rollout's own forward passes)
against ``recompute`` (feed the batch back), in each twin, and the twins' cached paths against
each other.

Both paths compute the same sum ``-sum_i w_i A_i log pi(a_i|s_i) - c sum_i w_i H_i`` over the
same rows with the same weights; only the order of the floating-point sums differs (T
backward passes of N rows accumulated, against one of T*N rows). So the gradients agree to
rounding: relative to each variable's largest gradient entry, <= 1e-9 in float64 and
<= 1e-5 in float32 (float32 eps = 1.2e-7, times the few terms summed).
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.parity.ladder import ParityReport, compare_arrays
from pgtwin.twins import IMPLS
from tests.update_path_cases import CASES, agent, config, envs_for, recorded_batch

RTOL = {"float64": 1e-9, "float32": 1e-5}


def compare(report: ParityReport, rung: str, a: dict, b: dict, rtol: float, context: str) -> None:
    """Add a row per name; the tolerance is relative to the largest entry of ``b[name]``."""
    for name in b:
        scale = float(np.max(np.abs(b[name])))
        report.add(compare_arrays(rung, name, a[name], b[name], rtol, atol=rtol * scale,
                                  context=context))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case_name", list(CASES))
def test_cached_gradient_equals_recompute_gradient_in_both_twins(case_name, dtype):
    case, rtol = CASES[case_name], RTOL[dtype]
    report, batches, cached_grads, recompute_agents = ParityReport(), {}, {}, {}
    for impl in IMPLS:
        cached = agent(impl, case, config("cached", dtype))
        recompute = recompute_agents[impl] = agent(impl, case, config("recompute", dtype))
        batch, _ = recorded_batch(cached, envs_for(case))
        g_recompute = recompute.gradients(batch)
        g_cached = cached.gradients(batch)
        compare(report, "gradients", g_cached, g_recompute, rtol,
                f"{impl} cached vs recompute, {case_name}, {dtype}")
        batches[impl], cached_grads[impl] = batch, g_cached
        # A zero gradient would make the comparison vacuous.
        assert all(np.max(np.abs(g)) > 0 for g in g_recompute.values()), impl
    if dtype == "float64":
        # Each twin recorded its own rollout; with equal weights and rng it is the same one.
        np.testing.assert_array_equal(batches["graph"].obs, batches["eager"].obs)
        np.testing.assert_array_equal(batches["graph"].actions, batches["eager"].actions)
        compare(report, "gradients", cached_grads["eager"], cached_grads["graph"], rtol,
                f"cached eager vs cached graph, {case_name}, {dtype}")
    else:
        # In float32 the twins' means differ in the last bit, and so do Gaussian samples
        # drawn from them; a cached agent can train only on its own rollout, so each twin's
        # cached gradient is held against the other twin's recompute on that rollout.
        for impl, other in zip(IMPLS, reversed(IMPLS)):
            compare(report, "gradients", cached_grads[impl],
                    recompute_agents[other].gradients(batches[impl]), rtol,
                    f"cached {impl} vs recompute {other}, {case_name}, {dtype}")
    assert report.ok, report.to_table()


@pytest.mark.parametrize("case_name", ["categorical_mlp", "gaussian_lstm"])
def test_cached_updates_equal_recompute_updates_with_clipping_and_entropy(case_name):
    """Two Adam steps with the entropy bonus and an active global-norm clip: same metrics,
    same weights (float64)."""
    case, rtol = CASES[case_name], RTOL["float64"]
    report = ParityReport()
    for impl in IMPLS:
        cached = agent(impl, case, config("cached", max_grad_norm=1e-3))
        recompute = agent(impl, case, config("recompute", max_grad_norm=1e-3))
        envs, state = envs_for(case), None
        for step in range(2):
            batch, state = recorded_batch(cached, envs, seed=step, state=state)
            m_recompute = recompute.update(batch)
            m_cached = cached.update(batch)
            assert m_cached["applied"] and m_recompute["applied"]
            assert m_recompute["grad_norm"] > 1e-3  # so the clip did act
            assert m_recompute["entropy"] > 0
            for key in ("loss", "grad_norm", "entropy"):
                report.add(compare_arrays("loss", f"{key} (update {step})", m_cached[key],
                                          m_recompute[key], rtol, context=impl))
        compare(report, "weights", cached.get_weights(), recompute.get_weights(), rtol,
                f"{impl} after 2 updates, {case_name}")
    assert report.ok, report.to_table()
