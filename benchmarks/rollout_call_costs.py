"""Where the eager rollout's gap to the TF1 twin sits: the policy call alone, and a rollout
step split into the call and the rest (docs/benchmarks.md section 5, "Seventh session").

``python -m benchmarks.rollout_call_costs [ROUNDS]`` prints, per twin (CartPole-v1 MLP,
64 envs, the ``rollout`` group's agents and sizes):

* ``tight loop``: µs per ``rollout_policy()`` call on one ``[64, 4]`` float32 batch, 2,000
  calls per round, the twins alternating; the median of the rounds.
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

import numpy as np

from benchmarks.conftest import agent_for
from benchmarks.test_iteration import ENV_ID, KIND, NUM_ENVS, NUM_STEPS
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect

VARIANTS = ("graph", "function")
CALLS = 2000


def tight_loop(agents: dict, rounds: int) -> dict[str, float]:
    """``{variant: µs per call}``: the median over ``rounds`` of CALLS back-to-back calls."""
    obs = np.random.default_rng(0).standard_normal((NUM_ENVS, 4)).astype(np.float32)
    policies = {v: a.rollout_policy() for v, a in agents.items()}
    for p in policies.values():
        for _ in range(200):  # warm-up
            p(obs)
    times = {v: [] for v in agents}
    for _ in range(rounds):
        for v, p in policies.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                p(obs)
            times[v].append((time.perf_counter() - start) / CALLS * 1e6)
    return {v: float(np.median(t)) for v, t in times.items()}


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
    from pgtwin.mode_agnostic.cpu_allocator import use_reusing_allocator
    use_reusing_allocator()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    agents = {v: agent_for(v, KIND) for v in VARIANTS}
    calls = tight_loop(agents, rounds=15)
    steps = rollout_steps(agents, rounds)
    for v in VARIANTS:
        s = steps[v]
        print(f"{v:9} tight loop {calls[v]:6.1f} us/call   step after update {s['after_update']:6.1f}"
              f" us (policy in rollout {s['policy']:5.1f}, rest {s['after_update'] - s['policy']:5.1f})"
              f"   step after collect {s['after_collect']:6.1f} us")
    print("load average (1/5/15 min):", os.getloadavg())
