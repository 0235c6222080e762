"""Recompute vs cached update path: one whole training iteration (collect T steps of N
CartPole-v1 envs, then update), per twin.

Groups are ``update_path <twin> <N>x<T>``, each holding ``recompute`` and ``cached``, so
pytest-benchmark's table puts the two paths of one twin and size side by side::

    python -m pytest benchmarks/test_update_paths.py --benchmark-enable \\
        --benchmark-columns=min,median,mean,stddev,rounds --benchmark-sort=name

On a shared machine the two paths of a group are timed one after the other, so a load
change between them shows up as a speed difference. ``python -m benchmarks.test_update_paths``
therefore also measures the ratio interleaved (recompute, cached, recompute, ... in one
process) and prints the median per-pair ratio, which such drifts hardly move.
In CI (``--benchmark-disable``) each body runs once, as a test.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgcommon.config import UPDATE_PATHS, ReinforceConfig
from pgcommon.envs import make_vec_env
from pgcommon.loop import iterate_training
from pgcommon.specs import spec_for_env
from pgtwin.twins import IMPLS, agent_class

SIZES = ((16, 128), (64, 32))
"""(num_envs N, num_steps T): 2048 samples per update either way, long or wide rollouts."""


def training_iterations(impl: str, path: str, num_envs: int, num_steps: int):
    """An ``iterate_training`` generator, warmed up (traces built, unrolled graph and its
    executor created, one update done) so that each ``next`` is one steady-state iteration."""
    envs = make_vec_env("CartPole-v1", num_envs, seed=0)
    config = ReinforceConfig(num_envs=num_envs, num_steps=num_steps, update_path=path)
    agent = agent_class(impl)(spec_for_env(envs), config, seed=0)
    loop = iterate_training(agent, envs, np.random.default_rng(0))
    next(loop)
    return loop


@pytest.mark.parametrize("path", UPDATE_PATHS)
@pytest.mark.parametrize("num_envs,num_steps", SIZES)
@pytest.mark.parametrize("impl", IMPLS)
def test_training_iteration(benchmark, impl, num_envs, num_steps, path):
    benchmark.group = f"update_path {impl} {num_envs}x{num_steps}"
    benchmark.extra_info.update(impl=impl, update_path=path, num_envs=num_envs,
                                num_steps=num_steps, env="CartPole-v1",
                                env_steps=num_envs * num_steps)
    loop = training_iterations(impl, path, num_envs, num_steps)
    iteration = benchmark(next, loop)
    assert iteration.metrics["applied"]


def interleaved_ratios(pairs: int = 15) -> dict[tuple[str, int, int], dict[str, float]]:
    """Per twin and size: median ms per iteration of each path and the median (and
    quartiles) of the per-pair ratio cached / recompute, timing the two paths alternately,
    by wall clock and by this process's CPU time (which other users' load disturbs less)."""
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    out = {}
    for impl in IMPLS:
        for num_envs, num_steps in SIZES:
            loops = {p: training_iterations(impl, p, num_envs, num_steps) for p in UPDATE_PATHS}
            times = {(c, p): [] for c in clocks for p in UPDATE_PATHS}
            for i in range(pairs):
                for p in UPDATE_PATHS if i % 2 == 0 else UPDATE_PATHS[::-1]:
                    start = {c: clock() for c, clock in clocks.items()}
                    next(loops[p])
                    for c, clock in clocks.items():
                        times[c, p].append(clock() - start[c])
            row = {}
            for c in clocks:
                ratio = np.array(times[c, "cached"]) / np.array(times[c, "recompute"])
                row.update({f"{c}_recompute_ms": 1e3 * float(np.median(times[c, "recompute"])),
                            f"{c}_cached_ms": 1e3 * float(np.median(times[c, "cached"])),
                            f"{c}_ratio": float(np.median(ratio)),
                            f"{c}_q25": float(np.quantile(ratio, 0.25)),
                            f"{c}_q75": float(np.quantile(ratio, 0.75))})
            out[impl, num_envs, num_steps] = row
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"{n} interleaved pairs per row; ms are medians; ratio = cached / recompute per pair "
          "(median, quartiles)")
    print(f"{'twin':6} {'N x T':7} | {'wall: recompute':>15} {'cached':>7} {'ratio':>17} | "
          f"{'cpu: recompute':>14} {'cached':>7} {'ratio':>17}")
    for (impl, ne, ns), r in interleaved_ratios(n).items():
        cells = [f"{r[c + '_recompute_ms']:{w}.1f} {r[c + '_cached_ms']:7.1f} "
                 f"{r[c + '_ratio']:5.2f} ({r[c + '_q25']:.2f}-{r[c + '_q75']:.2f})"
                 for c, w in (("wall", 15), ("cpu", 14))]
        print(f"{impl:6} {f'{ne}x{ns}':7} | {cells[0]} | {cells[1]}")
