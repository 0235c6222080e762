"""Updates with each baseline, timed in turns: the steadier reading of issue 14's update ratios.

``python -m benchmarks.update_rounds [--batch-size 2048] [--rounds 5] [--calls 20]`` builds
each twin's agent per baseline (``benchmarks.test_per_sample.agent``, CartPole MLP (64, 64)),
warms each up with two ``agent.update`` calls on one rollout batch, then runs ``--rounds``
rounds. In each round every (twin, baseline) in turn makes ``--calls`` updates. It prints,
per twin and baseline, the median of the rounds' medians, the rounds' medians, and the ratio
to the twin's ``none``.

pytest-benchmark's ``update baseline`` groups (``benchmarks/test_per_sample.py``) time the
variants one after another, so the machine's drift between them enters their ratios
(docs/benchmarks.md section 6). Here each round sees every variant on the same machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

from benchmarks.test_per_sample import agent, rollout_batch

BASELINES = ("none", "optimal_scalar", "optimal_scalar_episodic", "optimal_per_param",
             "optimal_time")


def round_median(call: Callable[[], object], calls: int) -> float:
    """Milliseconds: the median of ``calls`` timed calls of ``call``."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def summary(rounds: dict[tuple[str, str], list[float]]) -> list[tuple[str, str, float, float | None]]:
    """``(twin, baseline, median ms, ratio to the twin's none or None)`` per entry of
    ``rounds`` (``(twin, baseline) -> each round's median``), in its order: the median of
    the round medians, divided by that of the same twin's ``none`` where there is one."""
    medians = {key: statistics.median(values) for key, values in rounds.items()}
    return [(twin, baseline, m,
             m / medians[(twin, "none")] if (twin, "none") in medians else None)
            for (twin, baseline), m in medians.items()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--twins", nargs="+", default=["graph", "eager"],
                        choices=["graph", "eager"])
    parser.add_argument("--baselines", nargs="+", default=list(BASELINES), choices=BASELINES)
    args = parser.parse_args(argv)
    batch = rollout_batch("categorical_mlp", args.batch_size)
    agents = {(twin, b): agent(twin, "categorical_mlp", b)
              for twin in args.twins for b in args.baselines}
    for a in agents.values():  # trace, compile, and the memory's first widening
        a.update(batch)
        a.update(batch)
    rounds: dict[tuple[str, str], list[float]] = {key: [] for key in agents}
    for _ in range(args.rounds):
        for key, a in agents.items():
            rounds[key].append(round_median(lambda a=a: a.update(batch), args.calls))
    print(f"B = {args.batch_size}, {args.rounds} rounds of {args.calls} updates each, in turns")
    for twin, baseline, ms, ratio in summary(rounds):
        shown = " ".join(f"{x:.2f}" for x in rounds[(twin, baseline)])
        versus = "" if ratio is None else f"  {ratio:5.2f}x none"
        print(f"{twin:6} {baseline:24} {ms:7.2f} ms{versus}   rounds: {shown}")
    print("load average (1/5/15 min):", os.getloadavg())


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.cpu_allocator import use_reusing_allocator
    use_reusing_allocator()
    main()
