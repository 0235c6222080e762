"""Group 5, a whole iteration, reported as env-steps per second: CartPole-v1, N = 64, T = 32.

``rollout``: ``pgtwin_core.rollout.collect`` of T x N env steps (policy calls, numpy sampling,
the vector env, bookkeeping), timed as a training run pays it: each timed collect follows an
untimed ``agent.update`` on the previous batch, and the policy is ``agent.rollout_policy()``
fetched anew, as ``pgtwin_core.loop.iterate_training`` does (docs/benchmarks.md section 5:
what an update leaves behind changes the next rollout's cost). ``iteration``: that rollout
plus ``agent.update`` on it, both timed. Each round continues the previous rollout (the
envs are not reset between rounds), as training does. ``extra_info['env_steps']`` is T x N,
so env-steps/s = env_steps / time.

pytest-benchmark times the variants one after another, so on a shared machine their ratio
moves with the load between them; ``python -m benchmarks.test_iteration [ROUNDS]`` times the
rollouts of the TF1 twin and the eager twin (``tf.function``) alternately, round by round,
and prints the ratio of the medians, in wall and in process CPU time.

``python -m benchmarks.test_iteration ROUNDS --processes PAIRS`` runs each twin alone in its
own process instead, as a training run does (``pgtwin train`` runs one twin): PAIRS pairs
of processes, the pair's order drawn at random, each timing ROUNDS rollouts, and prints
every pair's ratio and their median. Alternating in one process changes both twins'
figures: each twin's rollout then runs after the other twin's update and rollout, not only
after its own update (docs/benchmarks.md section 5, twenty-ninth session).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks.conftest import agent_for, eager_mode, label
from pgtwin_core import policy_inputs
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect
from pgtwin.parity.twin_parity import POLICY_KINDS

KIND = "categorical_mlp"
ENV_ID, NUM_ENVS, NUM_STEPS = POLICY_KINDS[KIND].env_id, 64, 32
ROLLOUT_ROUNDS = 60
"""Timed collects of the rollout group (each after its untimed update): ~0.2-1 s per variant."""


def rollout_policy(agent, variant: str):
    """The policy the rollout calls; for ``eager``, the tf.function's body op by op."""
    if variant == "eager":
        return lambda obs: agent._dist_params_fn(policy_inputs.as_obs(agent.spec, obs, dtype=agent.config.dtype)).numpy()
    return agent.rollout_policy()


@pytest.mark.parametrize("with_update", [False, True], ids=["rollout", "iteration"])
def test_iteration(benchmark, variant, with_update):
    envs = make_vec_env(ENV_ID, NUM_ENVS, seed=0)
    agent = agent_for(variant, KIND)
    rng = np.random.default_rng(0)
    carry = {"state": None, "batch": None}

    def rollout():
        carry["batch"], carry["state"] = collect(envs, rollout_policy(agent, variant), agent.spec,
                                                 NUM_STEPS, rng, carry["state"])
        return carry["batch"]

    def iteration():
        return agent.update(rollout())

    def update_before():  # the untimed half of a training iteration
        agent.update(carry["batch"])

    what = "iteration (collect + update)" if with_update else "rollout (collect)"
    benchmark.group = f"{what}: {ENV_ID}, N={NUM_ENVS}, T={NUM_STEPS}"
    label(benchmark, variant, env_steps=NUM_ENVS * NUM_STEPS)
    with eager_mode(variant):
        iteration()  # warm-up: resets the envs, traces and compiles the update and the policy
        if with_update:
            result = benchmark(iteration)
        else:
            result = benchmark.pedantic(rollout, setup=update_before, rounds=ROLLOUT_ROUNDS,
                                        warmup_rounds=1)
    if with_update:
        assert result["applied"], result
    else:
        assert result.actions.shape == (NUM_STEPS, NUM_ENVS)
    envs.close()


def interleaved_rollouts(rounds: int = 60, variants: tuple[str, ...] = ("graph", "function"),
                         ) -> dict[str, dict[str, float]]:
    """``{variant: {"wall": s, "cpu": s}}``: median seconds of one rollout (collect after an
    untimed update, as the ``rollout`` group), the ``variants`` taking turns, round by round,
    so that they see the same load, in an order drawn per round. One variant: it alone."""
    agents = {v: agent_for(v, KIND) for v in variants}
    runs = {}
    for v, agent in agents.items():
        envs, rng = make_vec_env(ENV_ID, NUM_ENVS, seed=0), np.random.default_rng(0)
        batch, state = collect(envs, agent.rollout_policy(), agent.spec, NUM_STEPS, rng)
        runs[v] = [envs, rng, batch, state]
    times = {v: {"wall": [], "cpu": []} for v in variants}
    order = random.Random(0)
    for _ in range(rounds):
        # in an order drawn anew each round: a fixed order times each twin after the same
        # other one, every round
        for v in order.sample(variants, len(variants)):
            agent = agents[v]
            envs, rng, batch, state = runs[v]
            agent.update(batch)
            wall, cpu = time.perf_counter(), time.process_time()
            batch, state = collect(envs, agent.rollout_policy(), agent.spec, NUM_STEPS, rng, state)
            times[v]["wall"].append(time.perf_counter() - wall)
            times[v]["cpu"].append(time.process_time() - cpu)
            runs[v][2:] = [batch, state]
    for envs, *_ in runs.values():
        envs.close()
    return {v: {k: float(np.median(t)) for k, t in kinds.items()} for v, kinds in times.items()}


def process_pairs(pairs: int, rounds: int, seed: int = 0) -> list[dict[str, dict[str, float]]]:
    """Per pair, ``{variant: {"wall": s, "cpu": s}}``: the ``graph`` and ``function`` variants
    each alone in a fresh process (``--alone``), one after the other in an order drawn per
    pair, each timing ``rounds`` rollouts as :func:`interleaved_rollouts` does for one."""
    order, results = random.Random(seed), []
    for _ in range(pairs):
        pair = {}
        for v in order.sample(["graph", "function"], 2):
            out = subprocess.run([sys.executable, "-m", "benchmarks.test_iteration", str(rounds),
                                  "--alone", v], check=True, capture_output=True, text=True)
            pair[v] = json.loads(out.stdout.strip().splitlines()[-1])[v]
        results.append(pair)
    return results


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.test_iteration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=60, help="timed rollouts per twin")
    parser.add_argument("--processes", type=int, metavar="PAIRS",
                        help="each twin alone in its own process, PAIRS pairs of processes")
    parser.add_argument("--alone", choices=["graph", "function"],
                        help="(internal) time this twin alone and print its medians as JSON")
    args = parser.parse_args(argv)
    steps = NUM_ENVS * NUM_STEPS
    if args.alone:
        print(json.dumps(interleaved_rollouts(args.rounds, (args.alone,))))
        return
    if args.processes:
        results = process_pairs(args.processes, args.rounds)
        for i, pair in enumerate(results):
            print(f"pair {i}: graph {steps / pair['graph']['wall']:9,.0f}   function "
                  f"{steps / pair['function']['wall']:9,.0f} env-steps/s (wall)   eager / graph "
                  f"{pair['graph']['wall'] / pair['function']['wall']:.3f}")
        for k in ("wall", "cpu"):
            ratios = [pair["graph"][k] / pair["function"][k] for pair in results]
            print(f"eager / graph env-steps/s ({k}), median of {len(ratios)} pairs: "
                  f"{float(np.median(ratios)):.3f}")
    else:
        medians = interleaved_rollouts(args.rounds)
        for v, m in medians.items():
            print(f"{v:9} env-steps/s: wall {steps / m['wall']:9,.0f}   cpu {steps / m['cpu']:9,.0f}")
        for k in ("wall", "cpu"):
            print(f"eager / graph env-steps/s ({k}): "
                  f"{medians['graph'][k] / medians['function'][k]:.3f}")
    print("load average (1/5/15 min):", os.getloadavg())


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    main()
