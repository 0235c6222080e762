"""``pgtwin train``: train one twin on one env, with logs, checkpoints and ``--resume``.

Hyperparameters not given on the command line come from ``pgtwin.train.env_defaults`` (per env);
on ``--resume`` they come from the run being resumed, and only the budget, stopping and
checkpointing options may change. See docs/cli.md.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

from pgtwin_core.baselines import EPISODIC
from pgtwin_core.config import BASELINES, DTYPES, OPTIMIZERS, ReinforceConfig
from pgtwin.train.env_defaults import for_episodic_baseline
from pgtwin.train.skipped_updates import MAX_CONSECUTIVE_SKIPS
from pgtwin.twins import IMPLS

HELP = "train one twin on one env (progress bar, TensorBoard, CSV, PNG, checkpoints)"


# ---------------------------------------------------------------- argument types
def int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value
    parse.__name__ = f"integer >= {low}"  # argparse names the type in some messages
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def unit_interval(text: str) -> float:
    """A number in [0, 1] (argparse type, for gamma)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (argparse type)."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value:g}")
    return value


def hidden_sizes(text: str) -> tuple[int, ...]:
    """Comma-separated layer sizes, e.g. ``64,64`` (argparse type)."""
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated integers like 64,64, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {text!r}")
    return sizes


# ---------------------------------------------------------------- parser
def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The seed, budget and hyperparameter options (all default to None: per-env defaults)."""
    p.add_argument("--seed", type=non_negative_int, default=None, help="run seed (default 0)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="env-step budget (default: per env, see pgtwin/train/env_defaults.py)")
    p.add_argument("--num-envs", type=positive_int, default=None, help="parallel envs N")
    p.add_argument("--num-steps", type=positive_int, default=None,
                   help="rollout length T per update")
    p.add_argument("--lr", type=positive_float, default=None, help="learning rate")
    p.add_argument("--gamma", type=unit_interval, default=None, help="discount in [0, 1]")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help="default adam")
    p.add_argument("--baseline", choices=BASELINES, default=None, help="default none")
    p.add_argument("--baseline-memory", type=_number, default=None, metavar="RHO",
                   help="decay in [0, 1) of earlier batches' sums in the episodic baselines "
                        "(default 0.5; 0: this batch only)")
    p.add_argument("--normalize-returns", action=argparse.BooleanOptionalAction, default=None,
                   help="standardise returns over each batch (default on)")
    p.add_argument("--entropy-coef", type=non_negative_float, default=None)
    p.add_argument("--max-grad-norm", type=positive_float, default=None)
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default float32")
    p.add_argument("--torso", choices=("mlp", "lstm"), default=None, help="default mlp")
    p.add_argument("--hidden", type=hidden_sizes, default=None, help="e.g. 64,64")
    p.add_argument("--history", type=positive_int, default=None,
                   help="observation window K for --torso lstm")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``pgtwin train``."""
    p = subparsers.add_parser("train", help=HELP, description=HELP)
    p.add_argument("--env", default=None,
                   help="gymnasium id (Box observations; Discrete or Box actions), e.g. "
                        "CartPole-v1, Pendulum-v1, BatteryArbitrage-v0; MODULE:ID imports "
                        "MODULE first (as --env-module)")
    p.add_argument("--env-module", default=None,
                   help="module to import before making the env (it registers the id)")
    p.add_argument("--impl", choices=IMPLS, default=None, help="twin (default eager)")
    add_run_arguments(p)
    p.add_argument("--logdir", default=None,
                   help="run directory (default runs/ENV__IMPL__sSEED__TIME; with --resume "
                        "the newest such dir)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --logdir from its last good checkpoint")
    p.add_argument("--no-stop", action="store_true",
                   help="keep training after the reward threshold is reached")
    p.add_argument("--solve-window", type=positive_int, default=None,
                   help="episodes the stopping mean is over (default 100)")
    p.add_argument("--checkpoint-every", type=non_negative_int, default=None,
                   help="updates between checkpoints (0: none)")
    p.add_argument("--keep-checkpoints", type=positive_int, default=None,
                   help="complete checkpoints kept (default 2)")
    p.add_argument("--max-consecutive-skips", type=non_negative_int, default=None, metavar="K",
                   help="stop with an error after K skipped updates in a row (non-finite loss "
                        f"or gradient, no complete episode; default {MAX_CONSECUTIVE_SKIPS}, "
                        "0: never)")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic TF ops and exact env checkpoints (bit-exact resume)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: only on a terminal)")
    p.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=True,
                   help="write TensorBoard scalars under LOGDIR/tb (default on)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary as the last line of stdout")
    p.add_argument("--strategy", choices=("mirrored", "multi-worker"), default=None,
                   help="train the eager twin under tf.distribute (see docs/scaling.md)")
    p.add_argument("--cpu-replicas", type=positive_int, default=None,
                   help="with --strategy: split this process's CPU into N devices, a replica each")
    p.add_argument("--worker-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="with --strategy multi-worker: a lost or stuck worker ends the others "
                        "within about this time (default 60)")
    p.add_argument("--collection", choices=("parallel", "sequential"), default=None,
                   help="with --strategy: the local replicas collect in a thread each "
                        "(default) or one after another")
    p.set_defaults(run=run, command_parser=p)
    return p


# ---------------------------------------------------------------- settings
def _safe(env_id: str) -> str:
    return env_id.replace(":", "_").replace("/", "_")


def default_logdir(env_id: str, impl: str, seed: int) -> str:
    """``runs/ENV__IMPL__sSEED__YYYYmmdd-HHMMSS``."""
    return os.path.join("runs", f"{_safe(env_id)}__{impl}__s{seed}__"
                                f"{time.strftime('%Y%m%d-%H%M%S')}")


def newest_logdir(env_id: str, impl: str, seed: int) -> str | None:
    """The newest ``runs/ENV__IMPL__sSEED__*`` directory, if any."""
    found = sorted(glob.glob(os.path.join("runs", f"{_safe(env_id)}__{impl}__s{seed}__*")))
    return found[-1] if found else None


def max_episode_steps(env_id: str | None) -> int | None:
    """The registered time limit of ``env_id`` (``module:Id`` looks up ``Id``), else None.

    An id whose module is not imported yet is not registered: None (its rollout length is
    left as given; batches without a complete episode are skipped).
    """
    import gymnasium

    if env_id is None:
        return None
    try:
        return gymnasium.spec(env_id.rsplit(":", 1)[-1]).max_episode_steps
    except gymnasium.error.Error:  # not registered (yet)
        return None


def config_from_args(args, base: ReinforceConfig | None, row) -> ReinforceConfig:
    """The run's ``ReinforceConfig``: arguments over ``base`` (a resumed run's) or ``row``."""
    given = {
        "num_envs": args.num_envs, "num_steps": args.num_steps, "learning_rate": args.lr,
        "gamma": args.gamma, "optimizer": args.optimizer, "baseline": args.baseline,
        "baseline_memory": args.baseline_memory,
        "normalize_returns": args.normalize_returns, "entropy_coef": args.entropy_coef,
        "max_grad_norm": args.max_grad_norm, "dtype": args.dtype,
    }
    given = {k: v for k, v in given.items() if v is not None}
    if (base is None and given.get("baseline", row.baseline) in EPISODIC
            and args.num_steps is None and args.num_envs is None):
        row = for_episodic_baseline(row, max_episode_steps(args.env))
    if base is None:
        base = ReinforceConfig(
            gamma=row.gamma, learning_rate=row.learning_rate, normalize_returns=row.normalize_returns,
            baseline=row.baseline, entropy_coef=row.entropy_coef, max_grad_norm=row.max_grad_norm,
            num_envs=row.num_envs, num_steps=row.num_steps)
    return base.replace(**given)


def settings_from_args(args, parser):
    """``(RunSettings, resume)`` from parsed arguments; argument errors exit via ``parser``."""
    from pgtwin.train.env_defaults import defaults_for
    from pgtwin.train.run import RunSettings, TrainingError, load_settings

    saved, logdir = None, args.logdir
    if args.resume:
        if logdir is None:
            if args.env is None:
                parser.error("--resume needs --logdir (or --env, --impl and --seed to find "
                             "the newest run under runs/)")
            logdir = newest_logdir(args.env.rsplit(":", 1)[-1], args.impl or "eager",
                                   args.seed or 0)
            if logdir is None:
                parser.error(f"--resume: no run of {args.env} found under runs/; pass --logdir")
        try:
            saved = load_settings(logdir)
        except TrainingError as err:
            parser.error(f"--resume: {err}")
    elif args.env is None:
        parser.error("the following arguments are required: --env")

    env_id, env_module = args.env, args.env_module
    if env_id is not None and ":" in env_id:
        if env_module is not None:
            parser.error(f"--env {env_id} names a module and so does --env-module "
                         f"{env_module}: give one")
        env_module, env_id = env_id.rsplit(":", 1)
    if saved is not None:
        env_id, env_module = env_id or saved.env_id, env_module or saved.env_module
    row = defaults_for(env_id)
    base = saved or RunSettings(env_id=env_id, impl="eager", config=ReinforceConfig(),
                                logdir="", total_steps=row.total_steps, hidden=row.hidden,
                                checkpoint_every=row.checkpoint_every)
    torso = args.torso or base.torso
    if args.history is not None and torso != "lstm":
        parser.error(f"--history {args.history} needs --torso lstm (the mlp sees one observation)")
    history = args.history or (base.history if saved else (row.history if torso == "lstm" else 1))
    impl = args.impl or base.impl
    seed = base.seed if args.seed is None else args.seed
    try:
        config = config_from_args(args, saved.config if saved else None, row)
        settings = RunSettings(
            env_id=env_id, env_module=env_module, impl=impl, config=config, seed=seed,
            logdir=logdir or default_logdir(env_id, impl, seed),
            total_steps=args.steps or base.total_steps, torso=torso,
            hidden=args.hidden or base.hidden, history=history,
            checkpoint_every=(base.checkpoint_every if args.checkpoint_every is None
                              else args.checkpoint_every),
            keep_checkpoints=args.keep_checkpoints or base.keep_checkpoints,
            stop_at_threshold=False if args.no_stop else (base.stop_at_threshold if saved else True),
            solve_window=args.solve_window or base.solve_window,
            deterministic=args.deterministic or base.deterministic,
            max_consecutive_skips=(base.max_consecutive_skips if args.max_consecutive_skips is None
                                   else args.max_consecutive_skips),
            progress=args.progress, tensorboard=args.tensorboard)
    except ValueError as err:
        parser.error(str(err))
    if saved is not None:
        changed = [f"{k} (run: {saved.fixed()[k]!r}, given: {v!r})"
                   for k, v in settings.fixed().items() if saved.fixed()[k] != v]
        if changed:
            parser.error("--resume cannot change the run's settings: " + "; ".join(changed))
    return settings, saved is not None


# ---------------------------------------------------------------- run
def check_env(settings, parser) -> None:
    """Import the env's module and check its spaces, without TensorFlow; exit 2 if refused."""
    from pgtwin_core.envs import env_spaces_check
    from pgtwin.train.run import import_env_module

    try:
        if settings.env_module:
            import_env_module(settings.env_module)
        env_spaces_check(settings.env_id)
    except ValueError as err:
        parser.error(str(err))


def run(args, parser) -> int:
    """Train; print the summary (``--json``: one JSON line last on stdout)."""
    from pgtwin.cli.tensorflow_startup import import_tensorflow
    from pgtwin.train.run import TrainingError, train

    parser = getattr(args, "command_parser", parser)
    settings, resume = settings_from_args(args, parser)
    check_env(settings, parser)  # before TensorFlow is imported: a refusal is immediate
    import_tensorflow()
    from pgtwin.train.distributed_run import is_distributed_run

    if (getattr(args, "strategy", None) or getattr(args, "cpu_replicas", None)
            or (resume and is_distributed_run(settings.logdir))):
        from pgtwin.train.distributed import run_train_command
        return run_train_command(args, parser, settings, resume)
    try:
        result = train(settings, resume=resume)
    except TrainingError as err:
        print(f"pgtwin train: error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:  # set-up: unknown env id, unsupported spaces, bad spec
        parser.error(str(err))
    except KeyboardInterrupt:
        print(f"pgtwin train: interrupted; resume with: pgtwin train --resume --logdir "
              f"{settings.logdir}", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result.summary()))
    else:
        print(human_summary(result))
    return 0


def human_summary(result) -> str:
    """A few lines a person reads at the end of a run."""
    mean = "-" if result.final_mean_return is None else f"{result.final_mean_return:.1f}"
    lines = [f"{result.env} ({result.impl}, seed {result.seed}): {result.updates} updates, "
             f"{result.env_steps} env steps in {result.wall_s:.1f} s; recent mean return {mean}"]
    if result.solved:
        lines.append(f"solved (mean >= {result.threshold:g}) at env-step "
                     f"{result.solved_at_env_steps}, {result.solved_at_wall_s:.1f} s")
    elif result.threshold is not None:
        lines.append(f"not solved (threshold {result.threshold:g})")
    if result.skipped_updates:
        lines.append(skipped_line(result))
    lines.append(f"logs: {result.logdir} (episodes.csv, learning_curve.png, tb/, checkpoints/)")
    return "\n".join(lines)


def skipped_line(result) -> str:
    """How many updates were skipped, and why (``RunResult.skipped_by_reason``)."""
    from pgtwin.train.skipped_updates import ADVICE

    why = "; ".join(f"{n} {reason.replace('_', ' ')} ({ADVICE[reason]})"
                    for reason, n in result.skipped_by_reason.items())
    untrained = (" - none was applied: the weights are the initial ones"
                 if result.skipped_updates == result.updates else "")
    return f"{result.skipped_updates} of {result.updates} updates skipped: {why}{untrained}"
