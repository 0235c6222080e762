"""Variants timed in turns, round by round: the steadier reading of a ratio between them.

pytest-benchmark times the variants of a group one after another, so the machine's drift
between them enters their ratios (docs/benchmarks.md sections 3 and 6: on a shared VM two
sequential runs of one group have read the same ratio 1.7x apart). Here each round times
every variant once, for ``calls`` calls, so each round sees all of them on the same machine,
and a variant's figure is the median of its round medians. The ratio to the reference is
printed twice: the ratio of those medians, and the median of the rounds' own ratios, which
keeps a slow stretch of the machine that spans one round out of the ratio (docs/benchmarks.md
section 6, twenty-third session: on a VM whose rounds of one variant ranged 2x).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

Key = tuple[str, str]
"""``(twin, variant)``."""


def parser(description: str, rounds: int, calls: int) -> argparse.ArgumentParser:
    """The options every in-turns command takes: ``--batch-size`` (2048), ``--rounds``,
    ``--calls`` (per variant per round) and ``--twins`` (both)."""
    out = argparse.ArgumentParser(description=description)
    out.add_argument("--batch-size", type=int, default=2048)
    out.add_argument("--rounds", type=int, default=rounds)
    out.add_argument("--calls", type=int, default=calls)
    out.add_argument("--twins", nargs="+", default=["graph", "eager"], choices=["graph", "eager"])
    return out


def round_median(call: Callable[[], object], calls: int) -> float:
    """Milliseconds: the median of ``calls`` timed calls of ``call``.

    Each call's result stays alive until the next call has returned, as a caller that uses
    it keeps it (and as pytest-benchmark's loop does). A per-sample call then writes a buffer
    other than the one it wrote last, which on the EPYC VM cost it about a quarter more than
    writing that one again (docs/benchmarks.md section 3)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        _held = call()  # replaced only once the next call has returned
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def in_turns(variants: dict[Key, Callable[[], object]], rounds: int,
             calls: int) -> dict[Key, list[float]]:
    """``{key: [ms per round]}``: ``rounds`` rounds, in each of which every variant in turn
    (in ``variants``' order) makes ``calls`` calls; a round's figure is their median."""
    out: dict[Key, list[float]] = {key: [] for key in variants}
    for _ in range(rounds):
        for key, call in variants.items():
            out[key].append(round_median(call, calls))
    return out


def summary(rounds: dict[Key, list[float]],
            reference: str) -> list[tuple[str, str, float, float | None]]:
    """``(twin, variant, median ms, ratio to the twin's reference or None)`` per entry of
    ``rounds`` (``(twin, variant) -> each round's median``), in its order: the median of
    the round medians, divided by that of the same twin's ``reference`` where there is one."""
    medians = {key: statistics.median(values) for key, values in rounds.items()}
    return [(twin, variant, m,
             m / medians[(twin, reference)] if (twin, reference) in medians else None)
            for (twin, variant), m in medians.items()]


def round_ratios(rounds: dict[Key, list[float]], reference: str) -> dict[Key, float]:
    """``{key: median over the rounds of (the key's round / the same twin's reference's
    round)}``, for each key of ``rounds`` whose twin has a ``reference`` entry timed in as
    many rounds."""
    out = {}
    for (twin, variant), values in rounds.items():
        base = rounds.get((twin, reference))
        if base is not None and len(base) == len(values):
            out[(twin, variant)] = statistics.median(v / b for v, b in zip(values, base))
    return out


def print_summary(rounds: dict[Key, list[float]], reference: str) -> None:
    """One line per entry of :func:`summary`, with the median of its rounds' own ratios
    (:func:`round_ratios`) and its rounds, then the load average."""
    per_round = round_ratios(rounds, reference)
    for twin, variant, ms, ratio in summary(rounds, reference):
        shown = " ".join(f"{x:.2f}" for x in rounds[(twin, variant)])
        versus = "" if ratio is None else f"  {ratio:5.2f}x {reference}"
        if (twin, variant) in per_round:
            versus += f" (per round {per_round[(twin, variant)]:5.2f}x)"
        print(f"{twin:6} {variant:24} {ms:7.2f} ms{versus}   rounds: {shown}")
    print("load average (1/5/15 min):", os.getloadavg())


def report(variants: dict[Key, Callable[[], object]], args: argparse.Namespace, what: str,
           reference: str) -> dict[Key, list[float]]:
    """Times ``variants`` in turns (``args``' rounds and calls, :func:`parser`), prints a
    header (the batch size, rounds and calls of ``what``) and :func:`print_summary` against
    ``reference``, and returns the rounds."""
    rounds = in_turns(variants, args.rounds, args.calls)
    print(f"B = {args.batch_size}, {args.rounds} rounds of {args.calls} {what} each, in turns")
    print_summary(rounds, reference)
    return rounds
