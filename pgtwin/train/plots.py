"""Learning-curve PNGs (matplotlib's Agg canvas: no display, no global pyplot state)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curve:
    """One run's finished episodes, in the order they finished."""

    label: str
    env_steps: np.ndarray
    """int ``[E]``: the env-step at which each episode ended."""
    returns: np.ndarray
    """float ``[E]``: each episode's undiscounted return."""


def trailing_mean(x: np.ndarray, window: int) -> np.ndarray:
    """``y[i] = mean(x[max(0, i - window + 1) : i + 1])``, float64 ``[E]``."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, x.size + 1)
    lo = np.maximum(0, i - window)
    return (c[i] - c[lo]) / (i - lo)


def save_learning_curves(path: str, curves: list[Curve], title: str,
                         threshold: float | None = None, window: int = 100,
                         side_by_side: bool = False,
                         mark: tuple[float, str] | None = None) -> str:
    """Plot each curve's episode returns (faint) and their trailing mean over ``window``.

    The figure is :func:`learning_curve_figure`'s. The file is written to a temporary name
    and renamed, so ``path`` is never half a PNG.
    """
    fig = learning_curve_figure(curves, title, threshold, window, side_by_side, mark)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)
    return path


def learning_curve_figure(curves: list[Curve], title: str, threshold: float | None = None,
                          window: int = 100, side_by_side: bool = False,
                          mark: tuple[float, str] | None = None):
    """The learning-curve ``matplotlib.figure.Figure`` (Agg canvas attached).

    With ``side_by_side`` each curve gets its own panel (shared axes), else all share one.
    ``mark = (env_step, label)`` draws a labelled vertical line on every panel. Env steps
    are labelled in engineering form (``150k``, ``1.2M``): plain integers of six or more
    digits ran together on a 5.5-inch panel.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, MaxNLocator

    panels = len(curves) if side_by_side else 1
    fig = Figure(figsize=(5.5 * panels, 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, sharex=True, sharey=True, squeeze=False)[0]
    for k, curve in enumerate(curves):
        ax = axes[k if side_by_side else 0]
        color = f"C{k}"
        ax.plot(curve.env_steps, curve.returns, ".", color=color, alpha=0.15, markersize=2)
        ax.plot(curve.env_steps, trailing_mean(curve.returns, window), color=color,
                label=f"{curve.label} (mean of last {window})")
        if side_by_side:
            ax.set_title(curve.label)
    for ax in axes:
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1,
                       label=f"threshold {threshold:g}")
        if mark is not None:
            ax.axvline(mark[0], color="black", linestyle=":", linewidth=1, label=mark[1])
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        if not any(len(line.get_xdata()) for line in ax.get_lines()
                   if line.get_linestyle() == "None"):  # no episode's dot on this panel
            ax.text(0.5, 0.5, "no episode finished", transform=ax.transAxes, ha="center",
                    va="center", fontsize=12)
            ax.set_xticks([])  # no span of env steps to label: not matplotlib's -40m..40m
    axes[0].set_ylabel("episode return")
    fig.suptitle(title)
    return fig
