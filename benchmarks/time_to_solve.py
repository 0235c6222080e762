"""Time to solve an env with ``pgtwin train``, per twin and seed, each in a fresh process.

    python -m benchmarks.time_to_solve [--env CartPole-v1] [--impl graph eager]
                                       [--seeds 0 1 2] [--json FILE] [--curve FILE.png]
                                       [-- TRAIN ARGS]

Each run is ``pgtwin train --env ENV --impl IMPL --seed S --json`` (the defaults of
``pgtwin/train/settings.py`` unless TRAIN ARGS override them) in a new Python process that
imports TensorFlow first and then starts both clocks: the wall time (``command_s``) and the
process's CPU time, user + system over all its threads (``command_cpu_s``, from
``os.times``; on a shared machine it moves less with the load than wall time does). Both
count the trainer's start-up (agent, envs, log files), training until the run stops, and
the end of the run (final checkpoint, learning curve), not Python's import of TensorFlow.

Each env is judged against its target (:data:`TARGETS`, from issue #15):

* ``threshold``: the run stops when the mean return of the last 100 episodes reaches the
  gymnasium spec's ``reward_threshold``; the target is that it does so within ``within``
  env steps (None: within the run's budget). A *collapse* is the 100-episode mean falling
  below ``collapse_below`` after first having reached it (CartPole-v1: half the threshold,
  237.5); the lowest such mean is reported.
* ``final``: the run trains for ``after`` env steps (``--steps`` is set to it unless TRAIN
  ARGS give one) and the target is the mean return of its last 100 episodes at or above
  ``value``.

Prints one row per run and a markdown table per twin (env steps, CPU and wall seconds,
collapse, target met), then the median CPU time and the load average. ``--curve`` draws
every run's learning curve (the 100-episode mean against env steps and training seconds).
Not collected by pytest (no ``test_`` prefix): it trains for real.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from pgtwin.train.episode_log import read_episodes
from pgtwin.train.plots import trailing_mean

CHILD = """
import json, os, sys, time
import tensorflow  # not timed
def cpu():
    t = os.times()
    return t.user + t.system
start, start_cpu = time.perf_counter(), cpu()
from pgtwin.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "command_s": time.perf_counter() - start,
                  "command_cpu_s": cpu() - start_cpu}))
"""

WINDOW = 100
"""Episodes the means are over (``pgtwin train``'s ``--solve-window`` default)."""


@dataclass(frozen=True)
class Target:
    """What a run of an env must reach (see the module docstring)."""

    kind: str
    """``threshold`` or ``final``."""
    value: float
    """The reward threshold, or the least final mean return."""
    within: int | None = None
    """``threshold``: the env steps it must be reached within (None: the run's budget)."""
    after: int | None = None
    """``final``: the env steps trained for."""
    collapse_below: float | None = None
    """``threshold``: a mean below this after first reaching it is a collapse."""


TARGETS: dict[str, Target] = {
    "CartPole-v1": Target("threshold", 475.0, within=500_000, collapse_below=237.5),
    "Acrobot-v1": Target("threshold", -100.0),
    "Pendulum-v1": Target("final", -700.0, after=200_000),
}
"""Issue #15's targets, over seeds 0-9 in both twins."""


def run_once(env_id: str, impl: str, seed: int, train_args: list[str], logdir: str) -> dict:
    """One fresh-process ``pgtwin train``: its JSON summary, ``command_s``, ``command_cpu_s``
    and the episodes (env steps, return, wall seconds)."""
    argv = ["train", "--env", env_id, "--impl", impl, "--seed", str(seed),
            "--logdir", logdir, "--json", "--no-progress", *train_args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True,
                          env=env)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(lines) < 2:
        raise RuntimeError(f"pgtwin {' '.join(argv)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    summary, timing = json.loads(lines[-2]), json.loads(lines[-1])
    episodes = read_episodes(os.path.join(logdir, "episodes.csv"))
    return {**summary, **timing, "argv": argv,
            "episodes": {k: episodes[k].tolist() for k in ("env_steps", "return", "wall_s")}}


def collapse(returns: np.ndarray, level: float, window: int = WINDOW) -> float | None:
    """The lowest full-window mean return after the mean first reached ``level``, if it fell
    below ``level``; None when it never reached it or never fell back below it."""
    if returns.size < window:
        return None
    means = trailing_mean(returns, window)[window - 1:]
    above = np.flatnonzero(means >= level)
    if above.size == 0:
        return None
    lowest = float(means[above[0]:].min())
    return lowest if lowest < level else None


def judge(run: dict, target: Target) -> dict:
    """``run`` with ``collapse_to`` (see :func:`collapse`) and ``met`` (the target) added."""
    returns = np.asarray(run["episodes"]["return"], dtype=np.float64)
    low = None if target.collapse_below is None else collapse(returns, target.collapse_below)
    if target.kind == "threshold":
        reached = run["solved_at_env_steps"]
        met = reached is not None and (target.within is None or reached <= target.within)
        met = met and low is None
    else:
        final = run["final_mean_return"]
        met = final is not None and final >= target.value
    return {**run, "collapse_to": low, "met": bool(met)}


def table(runs: list[dict], target: Target) -> str:
    """A markdown table of one twin's runs."""
    if target.kind == "threshold":
        head = "| seed | solved at env steps | CPU s | wall s | collapse (lowest mean) | met |"
        rows = [f"| {r['seed']} | {_k(r['solved_at_env_steps'])} | {r['command_cpu_s']:.2f} | "
                f"{r['command_s']:.2f} | {_f(r['collapse_to'])} | {'yes' if r['met'] else 'no'} |"
                for r in runs]
    else:
        head = "| seed | env steps | final mean (last 100) | CPU s | wall s | met |"
        rows = [f"| {r['seed']} | {_k(r['env_steps'])} | {_f(r['final_mean_return'])} | "
                f"{r['command_cpu_s']:.2f} | {r['command_s']:.2f} | {'yes' if r['met'] else 'no'} |"
                for r in runs]
    return "\n".join([head, "|" + "---|" * (head.count("|") - 1), *rows])


def _k(steps: int | None) -> str:
    return "-" if steps is None else f"{steps / 1000:.0f}k"


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def plot_curves(runs: list[dict], path: str, title: str, threshold: float | None) -> None:
    """Trailing-mean returns against env steps (left) and training seconds (right)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    impls = list(dict.fromkeys(r["impl"] for r in runs))
    fig = Figure(figsize=(10, 3.2 * len(impls)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(impls), 2, sharey=True, squeeze=False)
    for row, impl in enumerate(impls):
        for k, r in enumerate(x for x in runs if x["impl"] == impl):
            ep = r["episodes"]
            mean = trailing_mean(np.asarray(ep["return"]), WINDOW)
            label = f"seed {r['seed']}: {r['command_cpu_s']:.1f} CPU s"
            axes[row, 0].plot(ep["env_steps"], mean, color=f"C{k % 10}", label=label)
            axes[row, 1].plot(ep["wall_s"], mean, color=f"C{k % 10}", label=label)
        for col, xlabel in enumerate(("env steps", "training seconds (after start-up)")):
            ax = axes[row, col]
            if threshold is not None:
                ax.axhline(threshold, color="gray", linestyle="--", linewidth=1)
            ax.set_xlabel(xlabel)
            ax.set_title(f"{impl} twin", fontsize=9)
            ax.grid(alpha=0.3)
        axes[row, 0].set_ylabel(f"mean return, last {WINDOW} episodes")
        axes[row, 1].legend(loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", help=f"one of {sorted(TARGETS)}")
    parser.add_argument("--impl", nargs="+", default=["graph", "eager"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--json", metavar="FILE", help="write every run's figures here")
    parser.add_argument("--curve", metavar="FILE.png", help="draw the learning curves here")
    args, train_args = parser.parse_known_args(argv)
    if args.env not in TARGETS:
        parser.error(f"--env {args.env!r} has no target; known: {sorted(TARGETS)}")
    target = TARGETS[args.env]
    train_args = [a for a in train_args if a != "--"]
    if target.kind == "final" and "--steps" not in train_args:
        train_args += ["--steps", str(target.after)]
    runs = []
    with tempfile.TemporaryDirectory(prefix="pgtwin-solve-") as tmp:
        for impl in args.impl:
            for seed in args.seeds:
                r = judge(run_once(args.env, impl, seed, train_args,
                                   os.path.join(tmp, f"{impl}-{seed}")), target)
                runs.append(r)
                print(f"{impl:5s} seed {seed}: met={r['met']} solved_at={r['solved_at_env_steps']} "
                      f"final={_f(r['final_mean_return'])} collapse={_f(r['collapse_to'])} "
                      f"cpu {r['command_cpu_s']:.2f} s wall {r['command_s']:.2f} s "
                      f"({r['env_steps']} env steps, {r['updates']} updates)", flush=True)
    ok = True
    print(f"\n{args.env}, pgtwin train {' '.join(train_args) or '(defaults)'}")
    for impl in args.impl:
        mine = [r for r in runs if r["impl"] == impl]
        met = all(r["met"] for r in mine)
        ok &= met
        cpu = [r["command_cpu_s"] for r in mine]
        print(f"\n{impl} twin: target met on every seed: {met}; CPU s median "
              f"{statistics.median(cpu):.2f}, max {max(cpu):.2f}")
        print(table(mine, target))
    print(f"\nload average (1/5/15 min): {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": args.env, "train_args": train_args, "target": target.__dict__,
                       "load": os.getloadavg(), "runs": runs}, f, indent=1)
    if args.curve:
        threshold = target.value if target.kind == "threshold" else None
        plot_curves(runs, args.curve, f"{args.env}, pgtwin train {' '.join(train_args)}",
                    threshold)
    return 0 if ok else 1


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    sys.exit(main())
