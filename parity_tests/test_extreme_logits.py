"""Extreme logits (trfl's 0 and 1000): both twins stay finite, agree, and hit the hand values.

``tests/expected_values.EXTREME_LOGITS`` has the derivation: log-probs [-1000, 0], entropy 0,
loss 500 and a gradient of +-1/2, even though e^-1000 underflows to 0.
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.twins import IMPLS, agent_class

from tests.expected_values import EXTREME_LOGITS as CASE


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_extreme_logits_stay_finite_in_both_twins(dtype):
    agents = [agent_class(impl)(CASE.spec, CASE.config(dtype), CASE.weights)
              for impl in IMPLS]
    try:
        results = []
        for agent in agents:
            out = {"params": agent.dist_params(CASE.obs),
                   "log_probs": agent.log_prob(CASE.obs, CASE.actions),
                   "loss": agent.loss_value(CASE.batch), **agent.gradients(CASE.batch)}
            metrics = agent.update(CASE.batch)
            out.update({k: metrics[k] for k in ("loss", "grad_norm", "entropy")})
            out.update({f"after/{n}": w for n, w in agent.get_weights().items()})
            assert metrics["applied"] is True
            for key, value in out.items():
                assert np.all(np.isfinite(value)), f"{agent.impl}: {key} = {value}"
            results.append(out)
        graph, eager = results
        for key in graph:
            np.testing.assert_array_equal(graph[key], eager[key], err_msg=key)
        np.testing.assert_array_equal(graph["log_probs"], CASE.log_probs)
        assert graph["entropy"] == CASE.entropy
        assert graph["loss"] == CASE.loss
        np.testing.assert_array_equal(graph["policy/head/bias"], CASE.grads["policy/head/bias"])
    finally:
        for agent in agents:
            agent.close()
