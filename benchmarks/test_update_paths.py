"""Recompute vs cached update path: one whole training iteration (collect T steps of N
CartPole-v1 envs, then update), per twin.

Groups are ``update_path <twin> <N>x<T>``, each holding ``recompute`` and ``cached``, so
pytest-benchmark's table puts the two paths of one twin and size side by side::

    python -m pytest benchmarks/test_update_paths.py --benchmark-enable \\
        --benchmark-columns=min,median,mean,stddev,rounds --benchmark-sort=name

On a shared machine the two paths of a group are timed one after the other, so a load
change between them shows up as a speed difference. ``python -m benchmarks.test_update_paths
[PAIRS [HIDDEN]]`` therefore also times them interleaved (recompute, cached, cached, recompute, ...
in one process) by CPU time, split into collect and update, and prints the median per-pair
ratio, which such drifts hardly move. ``... --memory`` prints the first-iteration time and
the peak memory growth of each path, one fresh process per configuration.
In CI (``--benchmark-disable``) each body runs once, as a test.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.config import UPDATE_PATHS, ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.loop import iterate_training
from pgtwin_core.rollout import collect
from pgtwin_core.specs import spec_for_env
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


class Iterations:
    """Collect + update by hand (the body of ``iterate_training``), timing the two parts."""

    def __init__(self, impl: str, path: str, num_envs: int, num_steps: int, hidden: int = 64):
        self.envs = make_vec_env("CartPole-v1", num_envs, seed=0)
        config = ReinforceConfig(num_envs=num_envs, num_steps=num_steps, update_path=path)
        spec = spec_for_env(self.envs, hidden=(hidden, hidden))
        self.agent = agent_class(impl)(spec, config, seed=0)
        self.rng, self.state = np.random.default_rng(0), None
        self.step(time.process_time)  # warm-up

    def step(self, clock) -> tuple[float, float]:
        """One iteration; ``(collect seconds, update seconds)`` by ``clock``."""
        start = clock()
        batch, self.state = collect(self.envs, self.agent.rollout_policy(), self.agent.spec,
                                    self.agent.config.num_steps, self.rng, self.state)
        mid = clock()
        self.agent.update(batch)
        return mid - start, clock() - mid


def interleaved_ratios(pairs: int = 15, hidden: int = 64,
                       ) -> dict[tuple[str, int, int], dict[str, float]]:
    """Per twin and size: median ms of collect, update and their total for each path, and the
    median (and quartiles) of the per-pair ratio of totals cached / recompute, timing the two
    paths alternately by this process's CPU time (which other users' load disturbs less than
    the wall clock; the TF thread pools' time is included)."""
    out = {}
    for impl in IMPLS:
        for num_envs, num_steps in SIZES:
            runs = {p: Iterations(impl, p, num_envs, num_steps, hidden) for p in UPDATE_PATHS}
            times = {p: [] for p in UPDATE_PATHS}
            for i in range(pairs):
                for p in UPDATE_PATHS if i % 2 == 0 else UPDATE_PATHS[::-1]:
                    times[p].append(runs[p].step(time.process_time))
            row = {}
            for p in UPDATE_PATHS:
                t = 1e3 * np.array(times[p])
                row.update({f"{p}_collect": float(np.median(t[:, 0])),
                            f"{p}_update": float(np.median(t[:, 1])),
                            f"{p}_total": float(np.median(t.sum(axis=1)))})
            ratio = (np.array(times["cached"]).sum(axis=1)
                     / np.array(times["recompute"]).sum(axis=1))
            row.update(ratio=float(np.median(ratio)), q25=float(np.quantile(ratio, 0.25)),
                       q75=float(np.quantile(ratio, 0.75)))
            out[impl, num_envs, num_steps] = row
    return out


def peak_rss_growth_mib(impl: str, path: str, hidden: int, iterations: int = 4) -> tuple[float, float]:
    """``(seconds of the first iteration, peak RSS growth in MiB)`` over ``iterations``
    16x128 iterations of a (hidden, hidden) MLP, from right after the agent is built.
    Run it in a fresh process per configuration: peak RSS never goes down."""
    envs = make_vec_env("CartPole-v1", 16, seed=0)
    config = ReinforceConfig(num_envs=16, num_steps=128, update_path=path)
    agent = agent_class(impl)(spec_for_env(envs, hidden=(hidden, hidden)), config, seed=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    loop = iterate_training(agent, envs, np.random.default_rng(0))
    next(loop)
    first = time.perf_counter() - start
    for _ in range(iterations - 1):
        next(loop)
    return first, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def print_memory_table(hiddens=(64, 1024)) -> None:
    """One fresh process per (hidden, twin, path); see ``peak_rss_growth_mib``."""
    print("16x128 CartPole-v1 iterations; first iteration (s) includes building the "
          "cached path; peak RSS growth after the agent was built (MiB)")
    for hidden in hiddens:
        for impl in IMPLS:
            for path in UPDATE_PATHS:
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.test_update_paths", "--memory-one", impl,
                     path, str(hidden)], capture_output=True, text=True, check=True).stdout
                first, mib = map(float, out.split()[-2:])
                print(f"hidden {hidden:5} {impl:6} {path:10} first iteration {first:6.2f} s   "
                      f"peak RSS +{mib:5.0f} MiB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-one"]:
        print(*peak_rss_growth_mib(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        sys.exit()
    if sys.argv[1:2] == ["--memory"]:
        print_memory_table()
        sys.exit()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    hidden = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(f"MLP ({hidden}, {hidden}); {n} interleaved pairs per row; CPU ms per iteration (medians): collect + update = total;"
          " ratio = cached / recompute total per pair (median, quartiles)")
    print(f"{'twin':6} {'N x T':7} | {'recompute':^23} | {'cached':^23} | ratio")
    for (impl, ne, ns), r in interleaved_ratios(n, hidden).items():
        cells = [f"{r[p + '_collect']:6.1f} + {r[p + '_update']:5.1f} = {r[p + '_total']:5.1f}"
                 for p in UPDATE_PATHS]
        print(f"{impl:6} {f'{ne}x{ns}':7} | {cells[0]} | {cells[1]} | "
              f"{r['ratio']:.2f} ({r['q25']:.2f}-{r['q75']:.2f})")
