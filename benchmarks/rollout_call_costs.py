"""Where the eager rollout's gap to the TF1 twin sits: the policy call alone, and a rollout
step split into the call and the rest (docs/benchmarks.md section 5, "Seventh session").

``python -m benchmarks.rollout_call_costs [ROUNDS]`` prints, per twin (CartPole-v1 MLP,
64 envs, the ``rollout`` group's agents and sizes):

* ``tight loop``: µs per ``rollout_policy()`` call on one ``[64, 4]`` float32 batch, 2,000
  calls per round, the twins alternating; the median of the rounds.
* ``after spin`` / ``after read``: the same call timed alone, after a gap of 200 µs that
  spins on the clock (the caches stay as the call left them) or after reading a 4 MB array
  (what the env's numpy code between two calls does to the caches, more of it); the median
  over the rounds of each round's median call. A call that slows after the read pays for
  what its code and data lost from the caches.
* ``step after update`` / ``step after collect``: µs per env step of a ``collect`` of T = 32
  that follows an ``agent.update`` (as training does) or another collect.
* ``policy in rollout``: the part of ``step after update`` spent inside the policy calls;
  the rest of the step is the shared numpy code (sampling, the env, bookkeeping).

Both twins live in one process and take turns, so they see the same load.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable

import numpy as np

from benchmarks.conftest import agent_for
from benchmarks.test_iteration import ENV_ID, KIND, NUM_ENVS, NUM_STEPS
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect

VARIANTS = ("graph", "function")
CALLS = 2000


GAPS = ("none", "spin", "read")
"""What runs between two timed calls: nothing (the tight loop), 200 µs of spinning, a 4 MB read."""


def _gap(kind: str, flush: np.ndarray) -> Callable[[], object] | None:
    """The code run before each call of a ``kind`` round (None: nothing, back to back)."""
    if kind == "spin":
        def spin():
            end = time.perf_counter() + 200e-6
            while time.perf_counter() < end:
                pass
        return spin
    return flush.sum if kind == "read" else None


def call_costs(agents: dict, rounds: int) -> dict[str, dict[str, float]]:
    """``{variant: {gap: µs per call}}``: per round, CALLS back-to-back calls (gap ``none``,
    their mean) and CALLS // 10 calls each timed alone after the gap (their median); the
    median over ``rounds``, the twins alternating."""
    obs = np.random.default_rng(0).standard_normal((NUM_ENVS, 4)).astype(np.float32)
    flush = np.random.default_rng(1).standard_normal(4 * 2**20 // 8)
    policies = {v: a.rollout_policy() for v, a in agents.items()}
    for p in policies.values():
        for _ in range(200):  # warm-up
            p(obs)
    times = {v: {g: [] for g in GAPS} for v in agents}
    for _ in range(rounds):
        for v, p in policies.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                p(obs)
            times[v]["none"].append((time.perf_counter() - start) / CALLS * 1e6)
            for kind in GAPS[1:]:
                gap, each = _gap(kind, flush), []
                for _ in range(CALLS // 10):
                    gap()
                    start = time.perf_counter()
                    p(obs)
                    each.append(time.perf_counter() - start)
                times[v][kind].append(float(np.median(each)) * 1e6)
    return {v: {g: float(np.median(t)) for g, t in gaps.items()} for v, gaps in times.items()}


def rollout_steps(agents: dict, rounds: int) -> dict[str, dict[str, float]]:
    """``{variant: {"after_update", "after_collect", "policy": µs per env step}}``, medians."""
    runs = {}
    for v, a in agents.items():
        envs, rng = make_vec_env(ENV_ID, NUM_ENVS, seed=0), np.random.default_rng(0)
        batch, state = collect(envs, a.rollout_policy(), a.spec, NUM_STEPS, rng)
        runs[v] = [envs, rng, batch, state]
    times = {v: {"after_update": [], "after_collect": [], "policy": []} for v in agents}
    for _ in range(rounds):
        for v, a in agents.items():
            envs, rng, batch, state = runs[v]
            for mode in ("after_update", "after_collect"):
                if mode == "after_update":
                    a.update(batch)
                policy, inside = a.rollout_policy(), [0.0]

                def timed(obs, policy=policy, inside=inside):
                    start = time.perf_counter()
                    out = policy(obs)
                    inside[0] += time.perf_counter() - start
                    return out
                start = time.perf_counter()
                batch, state = collect(envs, timed, a.spec, NUM_STEPS, rng, state)
                times[v][mode].append((time.perf_counter() - start) / NUM_STEPS * 1e6)
                if mode == "after_update":
                    times[v]["policy"].append(inside[0] / NUM_STEPS * 1e6)
            runs[v][2:] = [batch, state]
    for envs, *_ in runs.values():
        envs.close()
    return {v: {k: float(np.median(t)) for k, t in kinds.items()} for v, kinds in times.items()}


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    agents = {v: agent_for(v, KIND) for v in VARIANTS}
    calls = call_costs(agents, rounds=15)
    steps = rollout_steps(agents, rounds)
    for v in VARIANTS:
        s, c = steps[v], calls[v]
        print(f"{v:9} tight loop {c['none']:6.1f} us/call (after spin {c['spin']:6.1f}, after read"
              f" {c['read']:6.1f})   step after update {s['after_update']:6.1f}"
              f" us (policy in rollout {s['policy']:5.1f}, rest {s['after_update'] - s['policy']:5.1f})"
              f"   step after collect {s['after_collect']:6.1f} us")
    print("load average (1/5/15 min):", os.getloadavg())
