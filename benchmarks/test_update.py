"""Group 2, the update step: ``agent.update(batch)`` at B = 256 and B = 2048, per policy kind.

One optimizer step (Adam) on a fixed rollout: returns and normalisation (shared numpy code),
the forward pass, the loss, its gradient and the guarded apply. Every variant starts from the
same weights and steps on the same batch, so each round does the same work. The ``function``
variant must not retrace after its warm-up call (checked here, not just timed).
"""
from __future__ import annotations

import pytest

from benchmarks.conftest import UPDATE_KINDS, agent_for, eager_mode, label, rollout_batch


@pytest.mark.parametrize("batch_size", [256, 2048])
@pytest.mark.parametrize("kind_name", UPDATE_KINDS)
def test_update(benchmark, variant, kind_name, batch_size):
    batch = rollout_batch(kind_name, batch_size)
    agent = agent_for(variant, kind_name)
    benchmark.group = f"update: {kind_name} B={batch_size}"
    label(benchmark, variant, kind=kind_name, batch_size=batch_size)
    with eager_mode(variant):
        agent.update(batch)  # warm-up: traces the tf.function once
        traces = agent.trace_counts() if variant == "function" else None
        metrics = benchmark(agent.update, batch)
    assert metrics["applied"], metrics
    if traces is not None:
        assert agent.trace_counts() == traces, "the update retraced after warm-up"
