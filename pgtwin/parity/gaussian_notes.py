"""The Gaussian log-density or entropy that one side computes from another scale: read from
outputs that agree (the mean and the scale) and the fed actions, where an output parts.

A Gaussian policy's ``log_prob`` is written by hand in much migrated code, and its scale is
easy to mistake: the network's ``std`` used as a variance (``-0.5 (a - mu)^2 / std``), a
log-std head used as the std, a variance handed to ``Normal(scale=...)``. The rows then say
only that the log-probabilities part where ``mu`` and ``std`` agree. Here each agreed pair
of outputs shaped like the actions is tried as ``(mean, scale)`` under each reading of the
scale (:data:`READINGS`), and a row is told which reading each side's values follow.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np

from pgtwin.parity.ladder import Row
from pgtwin.parity.parity_rows import HALF_LOG_2PI

#: how a scale output s can be read: its std and log-std as functions of s, and the formula
#: printed for a log-density with that reading (positive-only readings need s > 0)
READINGS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str, bool]] = {
    "the standard deviation": (lambda s: s, "-0.5 ((a - mu) / s)^2 - log s", True),
    "the variance": (np.sqrt, "-0.5 (a - mu)^2 / s - 0.5 log s", True),
    "the log of the standard deviation": (np.exp, "-0.5 ((a - mu) / exp(s))^2 - s", False),
    "the log of the variance": (lambda s: np.exp(0.5 * s), "-0.5 (a - mu)^2 / exp(s) - 0.5 s",
                                False),
}

ENTROPY_CONSTANT = 0.5 * float(np.log(2.0 * np.pi * np.e))
"""A unit Gaussian's entropy per dimension."""


def gaussian_note(row: Row, legacy_out: Mapping[str, np.ndarray],
                  eager_out: Mapping[str, np.ndarray], fed: Mapping[str, np.ndarray],
                  agreed: list[str]) -> str:
    """For an output row that parts: where each side's values are a Gaussian log-density of
    a fed array (the actions) or an entropy, from two outputs that agree (the mean and the
    scale), and the two sides read the scale differently (:data:`READINGS`): which side
    reads it how, and the fix; '' otherwise (one side's values follow no reading, or both
    the same)."""
    if row.ok or row.item not in legacy_out or row.item not in eager_out:
        return ""
    ours, theirs = (np.asarray(x, np.float64) for x in (legacy_out[row.item],
                                                          eager_out[row.item]))
    for (scale, kind), values in _candidates(legacy_out, fed, agreed):
        found = [next((r for r, v in values.items() if _matches(v, x)), None)
                 for x in (ours, theirs)]
        if None not in found and found[0] != found[1]:
            return _told(row.item, scale, kind, found[0], found[1])
    return ""


def _candidates(legacy_out: Mapping[str, np.ndarray], fed: Mapping[str, np.ndarray],
                agreed: list[str]) -> Iterator[tuple[tuple[str, str], dict[str, list]]]:
    """``((scale output, 'log-density of X' or 'entropy'), {reading: [reduced values]})`` for
    each agreed output that can be a scale, with each agreed output of its shape as the
    mean and each fed float array of its shape as the actions."""
    outs = {k: np.asarray(legacy_out[k], np.float64) for k in agreed if k in legacy_out}
    for s_key, s in outs.items():
        if s.ndim == 0 or not np.all(np.isfinite(s)):
            continue
        readings = {r: f for r, (f, _, positive) in READINGS.items()
                    if not positive or np.all(s > 0)}
        stds = {r: f(s) for r, f in readings.items()}
        yield (s_key, "entropy"), {r: _reduced(np.log(v) + ENTROPY_CONSTANT)
                                   for r, v in stds.items()}
        for m_key, m in outs.items():
            if m_key == s_key or m.shape != s.shape:
                continue
            for a_key, a in fed.items():
                a = np.asarray(a)
                if a.shape != s.shape or a.dtype.kind != "f":
                    continue
                yield (s_key, f"log-density of {a_key!r} (mean {m_key!r})"), {
                    r: _reduced(-0.5 * ((a - m) / v) ** 2 - np.log(v) - HALF_LOG_2PI)
                    for r, v in stds.items()}


def _reduced(x: np.ndarray) -> list[np.ndarray]:
    """``x`` per element, summed over its last axis (one number per sample), and both of
    those averaged (the scalar a loss takes)."""
    per_sample = x.sum(axis=-1)
    return [x, per_sample, np.asarray(x.mean()), np.asarray(per_sample.mean())]


def _matches(forms: list[np.ndarray], x: np.ndarray) -> bool:
    """True where one of ``forms`` has ``x``'s shape and equals it to 1e-4 relative (float32
    outputs), with no constant left out: that is the offset note's."""
    return any(f.shape == x.shape and np.allclose(f, x, rtol=1e-4, atol=1e-5) for f in forms)


def _told(item: str, scale: str, kind: str, ours: str, theirs: str) -> str:
    """The note: the two readings of ``scale``, each side's formula, and the fix."""
    formula = READINGS[theirs][1] if kind != "entropy" else ""
    shown = f" ({formula} - 0.5 log(2 pi), s = {scale!r})" if formula else ""
    return (f"TF2Program's {item!r} is the Gaussian {kind} with {scale!r} read as "
            f"{theirs}{shown}, where TF1Program's reads it as {ours}: give the TF2 "
            f"code {scale!r} as {ours} (Normal(loc, scale) takes the standard deviation; "
            "a hand-written log-density divides (a - mu)^2 by the variance, std^2)")
