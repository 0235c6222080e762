"""``pgtwin demo``: both twins on CartPole-v1 from one seed: parity, curves, timing.

1. The twin parity ladder (``pgtwin.parity.twin_parity``, rungs variables -> outputs -> loss ->
   gradients -> weights after optimizer steps) on one fixed CartPole batch: the first
   updates of the two twins agree.
2. A training run per twin (``pgtwin.train.run``) with the same seed and settings, until
   the mean return of 100 episodes reaches 475 or the step budget is spent; their episode
   logs are compared (the first episode where the runs part, if they do).
3. One PNG with the two learning curves side by side, and a timing table.

float64 is the default: there the twins agree to ~1e-15, so the two runs sample the same
actions and their curves coincide. In float32 Keras and TF1 Adam round ``1 - beta_2``
differently (~1e-6 of a step), so the runs part after some updates and the curves are two
samples of the same algorithm.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from pgtwin_core.config import DTYPES
from pgtwin.cli.argument_types import non_negative_int, positive_int

HELP = "train CartPole-v1 with both twins from one seed; parity, curves and timing"
ENV_ID = "CartPole-v1"


def add_parser(subparsers):
    """Register ``pgtwin demo``."""
    p = subparsers.add_parser("demo", help=HELP, description=HELP)
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of both runs")
    p.add_argument("--steps", type=positive_int, default=300_000,
                   help="env-step budget per twin (default 300000)")
    p.add_argument("--dtype", choices=DTYPES, default="float64",
                   help="float64 (default: the twins' runs coincide) or float32")
    p.add_argument("--logdir", default=None, help="default runs/demo__TIME")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the runs an earlier demo left in --logdir")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars (default: only on a terminal)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary as the last line of stdout")
    p.set_defaults(run=run, command_parser=p)
    return p


def run(args, parser) -> int:
    """Run the demo; 0 when the ladder passes, 1 otherwise."""
    from pgtwin.cli.tensorflow_startup import import_tensorflow
    from pgtwin.parity.twin_parity import run_ladder
    from pgtwin.train.episode_log import read_episodes
    from pgtwin.train.plots import Curve, save_learning_curves
    from pgtwin.train.run import TrainingError, train
    from pgtwin.train.settings import resolve

    logdir = args.logdir or os.path.join("runs", f"demo__{time.strftime('%Y%m%d-%H%M%S')}")
    parser = getattr(args, "command_parser", parser)
    try:  # before the ladder's 40 s, not after
        prepare_demo_logdir(logdir, args.overwrite)
    except DemoLogdirError as err:
        parser.error(str(err))
    import_tensorflow()
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else print

    say(f"[1/3] parity ladder, {ENV_ID} policy, {args.dtype}, seed {args.seed}")
    ladder = run_ladder("categorical_mlp", args.dtype, seed=args.seed,
                        rungs=("variables", "outputs", "loss", "gradients", "weights"))
    for line in rung_lines(ladder):
        say("  " + line)
    say("  " + ladder.summary())

    results = {}
    for impl in ("graph", "eager"):
        settings = resolve(ENV_ID, {"impl": impl, "dtype": args.dtype, "seed": args.seed,
                                    "total_steps": args.steps, "checkpoint_every": 0,
                                    "progress": args.progress,
                                    "logdir": os.path.join(logdir, impl)})
        config = settings.config
        say(f"[2/3] training the {impl} twin ({config.num_envs} envs x {config.num_steps} "
            f"steps, Adam lr {config.learning_rate:g}, up to {args.steps} env steps)")
        try:
            results[impl] = train(settings, say=say)
        except TrainingError as err:
            print(f"pgtwin demo: error: {err}", file=sys.stderr)
            return 1
    episodes = {impl: read_episodes(os.path.join(logdir, impl, "episodes.csv"))
                for impl in results}
    parted = first_difference(episodes["graph"], episodes["eager"])

    png = os.path.join(logdir, "learning_curves.png")
    save_learning_curves(png, [Curve(f"{impl} twin", e["env_steps"], e["return"])
                               for impl, e in episodes.items()],
                         f"{ENV_ID}, seed {args.seed}, {args.dtype}: TF1 graph vs TF2 eager",
                         results["graph"].threshold, side_by_side=True,
                         mark=None if parted is None else (
                             float(episodes["graph"]["env_steps"][parted]), "runs part"))

    say("[3/3] timing (training loop only; the machine's other load counts too)")
    for line in timing_lines(results):
        say("  " + line)
    say("  " + parted_line(parted, episodes))
    say(f"learning curves: {png}")
    if args.json:
        print(json.dumps({"parity_ok": ladder.ok, "parity_summary": ladder.summary(),
                          "runs": {impl: r.summary() for impl, r in results.items()},
                          "runs_part_at_episode": parted, "png": png}))
    return 0 if ladder.ok else 1


class DemoLogdirError(ValueError):
    """The demo's logdir holds an earlier demo's runs, or cannot be written."""


def prepare_demo_logdir(logdir: str, overwrite: bool) -> None:
    """Check ``logdir`` before any work: writable, and no earlier run in its ``graph/`` and
    ``eager/`` unless ``overwrite`` (then they are removed, once no process holds them)."""
    from pgtwin.train.run_lock import RunLock, RunLockError
    from pgtwin.train.run_storage import StorageError, prepare_logdir
    from pgtwin.train.run import TrainingError, check_fresh_logdir

    try:
        prepare_logdir(logdir)
    except StorageError as err:
        raise DemoLogdirError(f"--logdir is not writable: {err}; nothing was run") from err
    for impl in ("graph", "eager"):
        run_dir = os.path.join(logdir, impl)
        try:
            check_fresh_logdir(run_dir)
            continue
        except TrainingError:
            if not overwrite:
                raise DemoLogdirError(
                    f"{run_dir} already holds a run (an earlier demo's): pass --overwrite to "
                    f"replace the demo's runs in {logdir}, or choose another --logdir") from None
        try:
            with RunLock(run_dir):
                shutil.rmtree(run_dir)
        except RunLockError as err:
            raise DemoLogdirError(f"cannot overwrite: {err}") from err


def rung_lines(report) -> list[str]:
    """Per rung: comparisons, worst max abs and max relative error, pass/fail."""
    lines = []
    for rung in dict.fromkeys(r.rung for r in report.rows):
        rows = [r for r in report.rows if r.rung == rung]
        verdict = "pass" if all(r.ok for r in rows) else "FAIL"
        lines.append(f"{rung:<10} {len(rows):>3} compared  max abs "
                     f"{max(r.max_abs for r in rows):.2e}  max rel "
                     f"{max(r.max_rel for r in rows):.2e}  {verdict}")
    return lines


def first_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> int | None:
    """The first episode whose (env_steps, env_index, return, length) differ; None if the
    shorter log is a prefix of the longer one."""
    n = min(len(a["episode"]), len(b["episode"]))
    same = np.ones(n, bool)
    for col in ("env_steps", "env_index", "return", "length"):
        same &= a[col][:n] == b[col][:n]
    return None if same.all() else int(np.argmin(same))


def parted_line(parted: int | None, episodes: dict) -> str:
    """Whether the two runs logged the same episodes."""
    if parted is None:
        n = min(len(e["episode"]) for e in episodes.values())
        return f"the two runs logged the same {n} episodes (same actions, same returns)"
    e = episodes["graph"]
    return (f"the runs are identical up to episode {parted} (update {e['update'][parted]}, "
            f"env-step {e['env_steps'][parted]}); there the twins' last-bit rounding "
            "differences, grown through the updates, turned a sampled action")


def timing_lines(results: dict) -> list[str]:
    """One line per twin, then the graph/eager ratio of env-steps per second: over the whole
    run, and after the first iteration. The first iteration holds each twin's tracing and
    XLA compiles (seconds, against a tenth of that per later iteration on CartPole), so in a
    run this short the overall rate is mostly the compiles; the rate after it is what a
    longer run approaches."""
    lines, rates, steady = [], {}, {}
    for impl, r in results.items():
        rates[impl] = r.env_steps / r.wall_s if r.wall_s > 0 else float("nan")
        steady[impl] = r.steady_env_steps_per_s()
        solved = (f"solved at {r.solved_at_env_steps} steps, {r.solved_at_wall_s:.1f} s"
                  if r.solved else "not solved")
        lines.append(f"{impl:<6} {r.env_steps:>7} env steps in {r.wall_s:6.1f} s = "
                     f"{rates[impl]:8.0f} steps/s; {solved}")
        if steady[impl] is not None:
            lines.append(f"       first iteration {r.first_iteration_s:.2f} s (tracing, XLA "
                         f"compiles), then {steady[impl]:8.0f} steps/s")
    ratio = f"graph / eager env-steps per second: {rates['graph'] / rates['eager']:.2f}"
    if steady["graph"] is not None and steady["eager"] is not None:
        ratio += (f" over the run, {steady['graph'] / steady['eager']:.2f} after the first "
                  "iteration")
    lines.append(ratio)
    return lines
