"""Env-steps/s of rollouts stepped here ("sync") vs in worker processes ("async").

On ``PgtwinSlowCartPole-v0`` (CartPole plus ~0.5 ms of CPU per step, benchmarks/slow_env.py)
with N envs: "sync" steps the N copies one after another in this process; "async" steps
each in its own process (gymnasium's AsyncVectorEnv), so it can use up to N cores, less
the pipe traffic per step. The policy is a fixed numpy one, so only env stepping and
``pgtwin_core.rollout.collect`` are timed. Real numbers::

    python -m pytest benchmarks/test_async_envs.py --benchmark-enable \\
        --benchmark-group-by=param:num_envs --benchmark-columns=mean,stddev,rounds

``extra_info['env_steps_per_s']`` holds the throughput of each case.
"""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.slow_env import BUSY_S, ENV_ID
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect
from pgtwin_core.specs import spec_for_env

NUM_STEPS = 32  # per env per timed call: 32 * N * 0.5 ms of busy CPU when stepped serially


@pytest.mark.parametrize("num_envs", [2, 4])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_collect_env_steps_per_second(benchmark, mode, num_envs):
    envs = make_vec_env(ENV_ID, num_envs, seed=0, vectorization=mode)
    try:
        spec = spec_for_env(envs)
        w = np.random.default_rng(0).normal(size=(spec.obs_dim, spec.action_size))
        rng, box = np.random.default_rng(0), {}
        box["batch"], box["state"] = collect(envs, lambda o: o @ w, spec, 1, rng)  # warm-up

        def rollout():
            box["batch"], box["state"] = collect(envs, lambda o: o @ w, spec, NUM_STEPS, rng,
                                                 box["state"])

        benchmark.pedantic(rollout, rounds=5, iterations=1, warmup_rounds=1)
        batch = box["batch"]
    finally:
        envs.close()
    assert batch.obs.shape == (NUM_STEPS, num_envs, 4) and batch.valid.any()
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["env_steps_per_s"] = NUM_STEPS * num_envs / stats.stats.mean
        benchmark.extra_info["busy_s_per_step"] = BUSY_S
