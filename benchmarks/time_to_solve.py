"""Time to solve CartPole-v1 with ``pgtwin train``, per twin and seed, each in a fresh process.

    python -m benchmarks.time_to_solve [--impl graph eager] [--seeds 0 1 2] [--json FILE]
                                       [--curve FILE.png] [-- TRAIN ARGS]

Each run is ``pgtwin train --env CartPole-v1 --impl IMPL --seed S --json`` (the defaults of
``pgtwin/train/settings.py`` unless TRAIN ARGS override them) in a new Python process that imports
TensorFlow first and then starts the clock: the time counted is the trainer's start-up
(agent, envs, log files) plus training until the mean return of the last 100 episodes
reaches 475 plus the end of the run (final checkpoint, learning curve), not Python's import of
TensorFlow. Prints one row per run, then the median and the maximum per twin and the load
average. ``--curve`` draws every run's learning curve (the mean return of the last 100
episodes against env steps and against training seconds), one colour per seed, one panel
row per twin. Not collected by pytest (no ``test_`` prefix): it trains for real.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from pgtwin.train.episode_log import read_episodes
from pgtwin.train.plots import trailing_mean

CHILD = """
import json, sys, time
import tensorflow  # not timed
start = time.perf_counter()
from pgtwin.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "command_s": time.perf_counter() - start}))
"""


def run_once(impl: str, seed: int, train_args: list[str], logdir: str) -> dict:
    """One fresh-process ``pgtwin train``; its JSON summary plus ``command_s``."""
    argv = ["train", "--env", "CartPole-v1", "--impl", impl, "--seed", str(seed),
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


def plot_curves(runs: list[dict], path: str, threshold: float = 475.0, window: int = 100) -> None:
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
            mean = trailing_mean(np.asarray(ep["return"]), window)
            label = f"seed {r['seed']}: {r['command_s']:.1f} s in all"
            axes[row, 0].plot(ep["env_steps"], mean, color=f"C{k}", label=label)
            axes[row, 1].plot(ep["wall_s"], mean, color=f"C{k}", label=label)
        for col, xlabel in enumerate(("env steps", "training seconds (after start-up)")):
            ax = axes[row, col]
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1)
            ax.set_xlabel(xlabel)
            ax.set_title(f"{impl} twin", fontsize=9)
            ax.grid(alpha=0.3)
        axes[row, 0].set_ylabel(f"mean return, last {window} episodes")
        axes[row, 1].legend(loc="lower right", fontsize=8)
    fig.suptitle("CartPole-v1, pgtwin train defaults", fontsize=10)
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", nargs="+", default=["graph", "eager"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--json", metavar="FILE", help="write every run's figures here")
    parser.add_argument("--curve", metavar="FILE.png", help="draw the learning curves here")
    args, train_args = parser.parse_known_args(argv)
    train_args = [a for a in train_args if a != "--"]
    runs = []
    with tempfile.TemporaryDirectory(prefix="pgtwin-solve-") as tmp:
        for impl in args.impl:
            for seed in args.seeds:
                r = run_once(impl, seed, train_args, os.path.join(tmp, f"{impl}-{seed}"))
                runs.append(r)
                print(f"{impl:5s} seed {seed}: solved={r['solved']} command {r['command_s']:.2f} s "
                      f"(solved at {r['solved_at_wall_s']} s of training, "
                      f"{r['solved_at_env_steps']} env steps, {r['updates']} updates)", flush=True)
    ok = True
    for impl in args.impl:
        times = [r["command_s"] for r in runs if r["impl"] == impl]
        solved = all(r["solved"] for r in runs if r["impl"] == impl)
        ok &= solved
        print(f"{impl}: every seed solved: {solved}; median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s")
    print(f"load average (1/5/15 min): {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    if args.curve:
        plot_curves(runs, args.curve)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
