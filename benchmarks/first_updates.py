"""The first two updates of a fresh agent, timed: what XLA's compiles cost an episodic baseline.

``python -m benchmarks.first_updates [--batch-size B]`` builds each twin's agent per baseline
(``benchmarks.test_per_sample.agent``, CartPole MLP (64, 64)), runs ``agent.update`` twice on one
rollout batch and prints both wall times. The first pays the compile; a second update that costs
as much compiled again (docs/benchmarks.md section 6: ``optimal_time``'s memory rows).
"""
from __future__ import annotations

import argparse
import os
import time

from benchmarks.test_per_sample import agent, rollout_batch

BASELINES = ("none", "optimal_per_param", "optimal_time")


def first_updates(impl: str, baseline: str, batch_size: int) -> tuple[float, float]:
    """Seconds of the first and the second ``update`` of a fresh agent on one batch."""
    a = agent(impl, "categorical_mlp", baseline)
    batch = rollout_batch("categorical_mlp", batch_size)
    times = []
    for _ in range(2):
        start = time.perf_counter()
        a.update(batch)
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    for impl in ("eager", "graph"):
        for baseline in BASELINES:
            first, second = first_updates(impl, baseline, args.batch_size)
            print(f"{impl:6} {baseline:18} first {first:7.3f} s   second {second:7.3f} s")
    print("load average (1/5/15 min):", os.getloadavg())


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    main()
