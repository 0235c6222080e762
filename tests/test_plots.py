"""The learning-curve PNG's env-step axis stays readable (issue 17, item 10): its tick labels
do not overlap, at the per-run size (one 5.5-inch panel) and the demo's two panels, for
runs up to 3M env steps (CartPole's budget). Checked on the drawn figure's label boxes.
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.train.plots import Curve, learning_curve_figure


def _labels(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
        lo, hi = ax.get_xlim()
        labels = [t for t in labels if lo <= t.get_position()[0] <= hi]
        out.append([(t.get_text(), t.get_window_extent(renderer)) for t in labels])
    return out


@pytest.mark.parametrize("last_step", [200_000, 3_000_000])
@pytest.mark.parametrize("panels", [1, 2])
def test_env_step_labels_do_not_run_together(last_step, panels):
    steps = np.linspace(1_000, last_step, 400).astype(np.int64)
    curves = [Curve(f"run {k}", steps, np.sin(steps / 1e4)) for k in range(panels)]
    fig = learning_curve_figure(curves, "title", threshold=0.5, side_by_side=panels == 2)
    for axis_labels in _labels(fig):
        assert len(axis_labels) >= 3
        boxes = sorted((box.x0, box.x1, text) for text, box in axis_labels)
        for (_, right, a), (left, _, b) in zip(boxes, boxes[1:]):
            assert right < left, f"labels {a!r} and {b!r} overlap"


def test_env_steps_are_written_in_engineering_form():
    steps = np.array([0, 100_000, 200_000])
    fig = learning_curve_figure([Curve("run", steps, np.zeros(3))], "t")
    texts = [t for t, _ in _labels(fig)[0]]
    assert "40k" in texts and "200k" in texts and "200000" not in texts


def test_a_run_without_a_finished_episode_says_so_and_labels_no_span():
    empty = np.zeros(0)
    fig = learning_curve_figure([Curve("run", empty.astype(np.int64), empty)], "t")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["no episode finished"]
    assert _labels(fig)[0] == []  # no tick labels: there is no span of env steps
