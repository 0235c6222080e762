"""``pgtwin train``: train one twin on one env, with logs, checkpoints and ``--resume``.

Hyperparameters not given on the command line come from ``pgtwin.train.settings`` (the table and its per-env overrides);
on ``--resume`` they come from the run being resumed, and only the budget, stopping and
checkpointing options may change. See docs/cli.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys
import traceback

from pgtwin_core.config import BASELINES, DTYPES, OPTIMIZERS, VALUE_FITS
from pgtwin_core.parallel_rollout import COLLECTIONS
from pgtwin_core.schedules import LR_SCHEDULES
from pgtwin_core.specs import TORSOS
from pgtwin.cli.argument_types import (finite_number, hidden_sizes, non_negative_float,
                                       non_negative_int, number_or_auto, positive_float,
                                       positive_int, unit_interval)
from pgtwin.train.distributed import STRATEGIES
from pgtwin.train.settings import NATURAL_STEP, defaults_for
from pgtwin.train.skipped_updates import MAX_CONSECUTIVE_SKIPS
from pgtwin.twins import IMPLS

HELP = "train one twin on one env (progress bar, TensorBoard, CSV, PNG, checkpoints)"


# ---------------------------------------------------------------- parser
def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The seed, budget and hyperparameter options (all default to None: per-env defaults)."""
    p.add_argument("--seed", type=non_negative_int, default=None, help="run seed (default 0)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="env-step budget (default: per env, see pgtwin/train/settings.py)")
    p.add_argument("--num-envs", type=positive_int, default=None, help="parallel envs N")
    p.add_argument("--num-steps", type=positive_int, default=None,
                   help="rollout length T per update")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="learning rate (default: per env, see docs/cli.md)")
    p.add_argument("--gamma", type=unit_interval, default=None,
                   help="discount in [0, 1] (default: per env)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="default adam, or the env's (Pendulum-v1: sgd with --natural-kl)")
    p.add_argument("--baseline", choices=BASELINES, default=None,
                   help="default: per env (CartPole-v1 mean), else none")
    p.add_argument("--baseline-memory", type=finite_number, default=None, metavar="RHO",
                   help="decay in [0, 1) of earlier batches' sums in the episodic baselines "
                        "(default 0.5; 0: this batch only)")
    p.add_argument("--baseline-shrinkage", type=number_or_auto, default=None,
                   metavar="LAMBDA",
                   help="optimal_scalar_episodic / optimal_per_param: shrink the ratio "
                        "baseline towards the mean, LAMBDA in [0, 1] or auto (default off; "
                        "docs/baselines.md)")
    p.add_argument("--gpomdp", action=argparse.BooleanOptionalAction, default=None,
                   help="weight step t's term by gamma^t (GPOMDP; with none, mean, time_mean "
                        "or value; default off)")
    p.add_argument("--value-hidden", type=hidden_sizes, default=None,
                   help="--baseline value: the value net's hidden sizes (default the policy's)")
    p.add_argument("--value-lr", type=positive_float, default=None,
                   help="--baseline value: its optimizer's learning rate (default 1e-2)")
    p.add_argument("--value-fit-steps", type=positive_int, default=None,
                   help="--baseline value: optimizer steps on the value loss per update "
                        "(default 10)")
    p.add_argument("--value-fit", choices=VALUE_FITS, default=None,
                   help="--baseline value: fit on this batch after its update (default, "
                        "unbiased) or before")
    p.add_argument("--value-horizon", type=non_negative_int, default=None,
                   help="--baseline value: time feature t / HORIZON (default the env's "
                        "time limit; 0 none)")
    p.add_argument("--gae-lambda", type=unit_interval, default=None, metavar="LAMBDA",
                   help="--baseline value: GAE(gamma, LAMBDA) advantages from the value net, "
                        "truncations and the rollout's cut bootstrapped (default off: "
                        "Monte-Carlo reward-to-go less V)")
    p.add_argument("--natural-kl", type=positive_float, default=None, metavar="DELTA",
                   help="natural policy gradient: precondition by the inverse Fisher of the "
                        "batch's per-sample scores, step to a KL of DELTA (then --optimizer "
                        "defaults to sgd and --lr, which scales the step, to 1; default off)")
    p.add_argument("--natural-damping", type=positive_float, default=None, metavar="LAMBDA",
                   help="--natural-kl: added to the Fisher's diagonal (default 0.1)")
    p.add_argument("--natural-cg-iters", type=positive_int, default=None, metavar="K",
                   help="--natural-kl: conjugate-gradient steps per update (default 10)")
    p.add_argument("--natural-backtracks", type=non_negative_int, default=None, metavar="K",
                   help="--natural-kl: halve the step up to K times until its measured KL "
                        "is within 1.5 DELTA and the surrogate loss falls (default 10; 0: "
                        "no line search)")
    p.add_argument("--normalize-returns", action=argparse.BooleanOptionalAction, default=None,
                   help="standardise returns over each batch (default on)")
    p.add_argument("--entropy-coef", type=non_negative_float, default=None)
    p.add_argument("--max-grad-norm", type=positive_float, default=None)
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=None,
                   help="learning rate over the run (default constant)")
    p.add_argument("--lr-floor", type=non_negative_float, default=None, metavar="FRACTION",
                   help="with --lr-schedule: the final lr as a fraction of --lr (default 0.1)")
    p.add_argument("--schedule-steps", type=positive_int, default=None,
                   help="env steps the schedules run over (default: --steps)")
    p.add_argument("--log-std-floor", type=finite_number, default=None,
                   help="Gaussian policies: the least log-std (default none)")
    p.add_argument("--log-std-floor-final", type=finite_number, default=None,
                   help="the log-std floor after --schedule-steps, reached linearly")
    p.add_argument("--obs-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="normalise observations by a running mean and std (default: per "
                        "env, on for CartPole-v1, Acrobot-v1 and Pendulum-v1, else off)")
    p.add_argument("--obs-norm-clip", type=positive_float, default=None,
                   help="clip normalised observations to [-C, C] (default 10)")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default float32")
    p.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                   help="XLA-compile the updates and the per-sample computations (default on; "
                        "--no-xla: no compile at start, slower updates)")
    p.add_argument("--torso", choices=TORSOS, default=None, help="default mlp")
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
                   help="updates between checkpoints, and one at the end (default 25; 0: "
                        "none)")
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
    p.add_argument("--strategy", choices=STRATEGIES, default=None,
                   help="train the eager twin under tf.distribute (see docs/scaling.md)")
    p.add_argument("--cpu-replicas", type=positive_int, default=None,
                   help="with --strategy: split this process's CPU into N devices, a replica each")
    p.add_argument("--worker-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="with --strategy multi-worker: a lost or stuck worker ends the others "
                        "within about this time (default 60)")
    p.add_argument("--collection", choices=COLLECTIONS, default=None,
                   help="with --strategy: the local replicas collect in a thread each "
                        "(default) or one after another")
    p.set_defaults(run=run, command_parser=p)
    return p


# ---------------------------------------------------------------- settings
#: Options by the ``RunSettings`` / ``ReinforceConfig`` field they set.
GIVEN = {"seed": "seed", "steps": "total_steps", "num_envs": "num_envs",
         "num_steps": "num_steps", "lr": "learning_rate", "gamma": "gamma",
         "optimizer": "optimizer", "baseline": "baseline", "baseline_memory": "baseline_memory",
         "baseline_shrinkage": "baseline_shrinkage",
         "normalize_returns": "normalize_returns", "entropy_coef": "entropy_coef",
         "gpomdp": "gpomdp", "value_hidden": "value_hidden", "value_lr": "value_learning_rate",
         "value_fit_steps": "value_fit_steps", "value_fit": "value_fit",
         "value_horizon": "value_horizon", "gae_lambda": "gae_lambda",
         "natural_kl": "natural_kl", "natural_damping": "natural_damping",
         "natural_cg_iters": "natural_cg_iters", "natural_backtracks": "natural_backtracks",
         "max_grad_norm": "max_grad_norm", "lr_schedule": "lr_schedule",
         "lr_floor": "lr_floor", "schedule_steps": "schedule_steps",
         "log_std_floor": "log_std_floor", "log_std_floor_final": "log_std_floor_final",
         "obs_norm": "obs_norm", "obs_norm_clip": "obs_norm_clip",
         "dtype": "dtype", "xla": "jit_compile", "torso": "torso",
         "hidden": "hidden", "history": "history", "impl": "impl",
         "solve_window": "solve_window", "checkpoint_every": "checkpoint_every",
         "keep_checkpoints": "keep_checkpoints",
         "max_consecutive_skips": "max_consecutive_skips", "logdir": "logdir"}


FLAGS_APART = ("deterministic",)
"""Settings whose flag :func:`given_values` reads apart from :data:`GIVEN` (named as the flag)."""


def option_for(setting: str) -> str:
    """The command-line option that gives ``setting`` (``config.learning_rate`` ->
    ``--lr (config.learning_rate)``, ``impl`` -> ``--impl``), or the setting's name where
    no option does."""
    field = setting.split(".", 1)[-1]
    option = next((o for o, f in GIVEN.items() if f == field), None)
    if option is None:  # a flag given_values sets apart (a store_true)
        return f"--{setting}" if setting in FLAGS_APART else setting
    flag = f"--{option.replace('_', '-')}"
    return flag if option == setting else f"{flag} ({setting})"


def given_values(args) -> dict:
    """The settings the command line gave, by field name (options left out are absent)."""
    given = {field: getattr(args, option) for option, field in GIVEN.items()
             if getattr(args, option) is not None}
    if args.no_stop:
        given["stop_at_threshold"] = False
    if args.deterministic:
        given["deterministic"] = True
    given["progress"], given["tensorboard"] = args.progress, args.tensorboard
    return given


def settings_from_args(args, parser):
    """``(RunSettings, resume)`` from parsed arguments; argument errors exit via ``parser``."""
    from pgtwin.train.run import TrainingError, import_env_module, load_settings
    from pgtwin.train.settings import newest_logdir, resolve

    saved, logdir = None, args.logdir
    if args.resume:
        if logdir is None:
            if args.env is None:
                parser.error("--resume needs --logdir (or --env, --impl and --seed to find "
                             "the newest run under runs/)")
            impl, seed = args.impl or "eager", args.seed or 0
            logdir = newest_logdir(args.env.rsplit(":", 1)[-1], impl, seed)
            if logdir is None:
                parser.error(f"--resume: no run of {args.env} with --impl {impl} and --seed "
                             f"{seed} found under runs/; pass --logdir, or the --impl and "
                             "--seed the run was trained with")
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
    torso = args.torso or (saved.torso if saved else "mlp")
    if args.history is not None and torso != "lstm":
        parser.error(f"--history {args.history} needs --torso lstm (the mlp sees one observation)")
    given = {**given_values(args), "env_module": env_module}
    if logdir is not None:
        given["logdir"] = logdir
    try:
        if env_module:  # first: the defaults read the env's registered time limit
            import_env_module(env_module)
        settings = resolve(env_id, given, saved)
    except Exception as err:  # noqa: BLE001  (the module's code: reported with its traceback)
        raise SystemExit(refused_or_failed(err, parser, f"importing the env module "
                                           f"{env_module!r} (for {env_id})")) from None
    if saved is None:
        say_dropped_natural_step(env_id, given, settings)
    if saved is not None:
        changed = [f"{option_for(k)} (run: {was!r}, given: {now!r})"
                   for k, (was, now) in settings.changed_from(saved).items()]
        if changed:
            parser.error("--resume cannot change the run's settings: " + "; ".join(changed))
    return settings, saved is not None


def say_dropped_natural_step(env_id: str, given: dict, settings) -> None:
    """A note on stderr when the env's default natural-gradient step was dropped because
    another option given conflicts with it (``settings.with_natural_step``): the run then
    trains with plain steps, which is not what the env's row was tuned for."""
    table = defaults_for(env_id).config
    if table.natural_kl is None or settings.config.natural_kl is not None or \
            "natural_kl" in given:
        return
    print(f"pgtwin train: note: {env_id}'s default natural gradient (natural_kl="
          f"{table.natural_kl}, {table.optimizer}, lr {table.learning_rate:g}) is off: it "
          "does not go with the options given (--optimizer adam, --max-grad-norm or an "
          "optimal baseline); training with plain steps of "
          f"{settings.config.optimizer}, lr {settings.config.learning_rate:g}",
          file=sys.stderr)


# ---------------------------------------------------------------- run
def check_env(settings, parser) -> None:
    """Import the env's module and check its spaces, without TensorFlow: exit 2 where pgtwin
    refuses them, exit 1 with :func:`pgtwin.cli.error_origin.foreign_failure`'s report
    (the cause, then the traceback) where the module's or the env's own code raised."""
    from pgtwin_core.envs import env_spaces_check
    from pgtwin.train.run import import_env_module

    try:
        if settings.env_module:
            import_env_module(settings.env_module)
        env_spaces_check(settings.env_id, settings.torso, settings.history)
    except Exception as err:  # noqa: BLE001  (the env's code: reported with its traceback)
        raise SystemExit(refused_or_failed(
            err, parser, f"making the env {settings.env_id!r} to check its spaces")) from None


def print_env_traceback(err: BaseException) -> None:
    """The traceback of the env's own exception behind ``err``, if the env raised (its
    code's bug is found there); nothing for pgtwin's refusals."""
    from pgtwin_core.errors import EnvStepError

    cause = err.__cause__
    if isinstance(cause, EnvStepError) and cause.__cause__ is not None:
        env_err = cause.__cause__
        traceback.print_exception(type(env_err), env_err, env_err.__traceback__,
                                  file=sys.stderr)


def interrupted(settings, workers: bool = False) -> int:
    """Ctrl-C: one line on stderr saying how to go on, and exit status 130.

    ``workers``: a multi-worker run, whose every worker resumes with the command (each
    with its own ``TF_CONFIG``). A distributed run's checkpoints are its workers' shards
    (``checkpoints/worker_N/update_M``)."""
    from pgtwin.train.resume_command import resume_command
    from pgtwin.train.run import has_checkpoint, run_paths

    command = resume_command(settings.logdir, settings.env_module)
    root = run_paths(settings.logdir)["checkpoints"]
    shards = glob.glob(os.path.join(root, "worker_*", "update_*"))
    if not os.path.exists(run_paths(settings.logdir)["settings"]):
        print(f"pgtwin train: interrupted before the run wrote anything to "
              f"{settings.logdir}: run the same command again to start it", file=sys.stderr)
    elif has_checkpoint(settings.logdir) or shards:
        every = " on every worker (each with its TF_CONFIG)" if workers else ""
        print(f"pgtwin train: interrupted; resume with: {command}{every}", file=sys.stderr)
    else:
        every = (f"one every {settings.checkpoint_every} updates, --checkpoint-every"
                 if settings.checkpoint_every else "--checkpoint-every 0 writes none")
        print(f"pgtwin train: interrupted before the first checkpoint ({every}); "
              f"{command} starts the run again from update 0 with its settings",
              file=sys.stderr)
    sys.stderr.flush()
    return 130


def refused_or_failed(err: Exception, parser, doing: str) -> int:
    """Exit 2 with the usage text for pgtwin's own refusal of the settings (a ValueError
    it raised); exit 1 with :func:`pgtwin.cli.error_origin.foreign_failure`'s report for
    anything raised inside TensorFlow, numpy or the env's code (``doing``: what was under
    way)."""
    from pgtwin.cli.error_origin import foreign_failure, raised_by_project

    if isinstance(err, ValueError) and raised_by_project(err):
        parser.error(str(err))
    print(f"pgtwin train: error: {foreign_failure(err, doing)}", file=sys.stderr)
    return 1


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
        return run_under_strategy(args, parser, settings, resume)
    for flag in ("worker_timeout", "collection"):
        if getattr(args, flag, None) is not None:  # would change nothing, said nowhere
            parser.error(f"--{flag.replace('_', '-')} needs --strategy (it sets how a "
                         "distributed run's replicas collect or its workers wait); this run "
                         "has none")
    try:
        result = train(settings, resume=resume)
    except TrainingError as err:
        print_env_traceback(err)
        print(f"pgtwin train: error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:  # set-up: unknown env id, unsupported spaces, bad spec
        return refused_or_failed(err, parser, f"setting up {settings.env_id} with the "
                                 f"{settings.impl} twin")
    except KeyboardInterrupt:
        return interrupted(settings)
    if args.json:
        print(json.dumps(result.summary()))
    else:
        print(human_summary(result))
    return 0


DEFAULT_WORKER_TIMEOUT = 60.0
"""Seconds after which a lost worker ends the others (``--worker-timeout``)."""


#: RunSettings fields the distributed loop does not run yet, with their "off" values.
NOT_UNDER_STRATEGY = {"obs_norm": False, "lr_schedule": "constant", "log_std_floor": None,
                      "log_std_floor_final": None}
#: Baselines the distributed agent refuses (eager.distributed), and what stands in for one
#: that came from the per-env table.
NOT_UNDER_STRATEGY_BASELINES, STRATEGY_BASELINE = ("time_mean", "value"), "mean"


def _without_table_only_options(args, settings):
    """``settings`` less the options of ``NOT_UNDER_STRATEGY`` (and a baseline of
    ``NOT_UNDER_STRATEGY_BASELINES``, for ``STRATEGY_BASELINE``) that came from the per-env
    defaults table, not from the command line (CartPole-v1's ``obs_norm``, Pendulum-v1's
    ``value``), with a note on stderr: a default must not make ``--strategy`` refuse the
    env. Given ones stay, and are refused by the caller or the distributed agent."""
    given = given_values(args)
    dropped = {k: off for k, off in NOT_UNDER_STRATEGY.items()
               if k not in given and getattr(settings, k) != off}
    changes = [f"{k}={getattr(settings, k)!r}" for k in dropped]
    if "baseline" not in given and settings.config.baseline in NOT_UNDER_STRATEGY_BASELINES:
        changes.append(f"baseline={settings.config.baseline!r} (baseline "
                       f"{STRATEGY_BASELINE!r} instead)")
        no_gae = {}
        if settings.config.gae_lambda is not None and "gae_lambda" not in given:
            changes.append(f"gae_lambda={settings.config.gae_lambda!r}")
            no_gae = {"gae_lambda": None}  # GAE needs the value net the baseline drops
        dropped["config"] = settings.config.replace(baseline=STRATEGY_BASELINE, **no_gae)
    if "natural_kl" not in given and settings.config.natural_kl is not None:
        # The row's natural step goes with the SGD it brought (the row's values without it).
        changes.append(f"natural_kl={settings.config.natural_kl!r}")
        table = defaults_for(settings.env_id, natural=False).config
        plain = {k: getattr(table, k) for k in NATURAL_STEP if k not in given}
        config = dropped.get("config", settings.config)
        dropped["config"] = config.replace(natural_kl=None, **plain)
    if not dropped:
        return settings
    out = dataclasses.replace(settings, **dropped)
    steps = (f" (steps of {out.config.optimizer}, lr {out.config.learning_rate:g})"
             if "natural_kl" not in given and settings.config.natural_kl is not None else "")
    print(f"pgtwin train: note: {settings.env_id}'s default " + ", ".join(changes)
          + f" is not available under --strategy yet; training without it{steps}",
          file=sys.stderr)
    return out


def run_under_strategy(args, parser, settings, resume: bool) -> int:
    """``pgtwin train --strategy mirrored|multi-worker``: the eager twin under ``tf.distribute``.

    Takes the env, hyperparameters, seed, torso and env-step budget from ``settings`` (a
    ``pgtwin.train.run.RunSettings``, already resolved from the arguments and per-env
    defaults); ``config.num_envs`` is per replica. Runs ``pgtwin.train.distributed_run`` (the
    single-process run's files, sharded checkpoints, ``--resume``); a resumed run takes
    its strategy from the run's ``cluster.json`` unless given. Exit status 1 with a message
    (and the ``--resume`` command) when a worker is lost or the run cannot go on.
    """
    from pgtwin.train import distributed_run
    from pgtwin.train.distributed import check_tf_config, make_strategy
    from pgtwin.train.run import TrainingError
    from pgtwin.train.worker_health import WorkerLostError

    strategy_name = getattr(args, "strategy", None)
    cpu_replicas = getattr(args, "cpu_replicas", None)
    if resume and distributed_run.is_distributed_run(settings.logdir):
        saved = distributed_run.read_cluster(settings.logdir)
        if strategy_name not in (None, saved.strategy):
            parser.error(f"--resume: {settings.logdir} was trained with --strategy "
                         f"{saved.strategy}, not {strategy_name}")
        strategy_name = saved.strategy
        if cpu_replicas is not None and cpu_replicas != saved.cpu_replicas:
            parser.error(f"--resume: {settings.logdir} was trained as {saved}; its checkpoints "
                         f"are cut to that many replicas, so --cpu-replicas {cpu_replicas} "
                         "cannot resume it (leave the flag out)")
        cpu_replicas = saved.cpu_replicas
    elif resume:
        parser.error(f"--resume --strategy: {settings.logdir} holds no distributed run (no "
                     f"{distributed_run.CLUSTER}); resume it without --strategy")
    if not strategy_name:
        parser.error("--cpu-replicas needs --strategy mirrored or multi-worker")
    if "gae_lambda" in given_values(args):
        parser.error("--gae-lambda is not available under --strategy (the distributed agent "
                     "has no value baseline); train without --strategy to use it")
    if "natural_kl" in given_values(args):
        parser.error("--natural-kl is not available under --strategy (the distributed agent "
                     "does not all-reduce per-sample scores); train without --strategy to "
                     "use it")
    settings = _without_table_only_options(args, settings)
    if settings.obs_norm or settings.schedules().active:
        parser.error("--obs-norm, --lr-schedule and --log-std-floor are not available under "
                     "--strategy yet (its loop is pgtwin.train.distributed's own); train "
                     "without --strategy to use them")
    if settings.impl != "eager":
        parser.error(f"--strategy needs --impl eager (tf.distribute trains the eager twin), "
                     f"got --impl {settings.impl}")
    if strategy_name == "multi-worker":
        try:
            check_tf_config(os.environ.get("TF_CONFIG"))
        except ValueError as err:
            parser.error(str(err))
    if strategy_name != "multi-worker" and getattr(args, "worker_timeout", None) is not None:
        parser.error(f"--worker-timeout needs --strategy multi-worker (a {strategy_name} run "
                     "has one worker, none to lose)")
    if strategy_name == "multi-worker" and not resume and args.logdir is None:
        parser.error("--strategy multi-worker needs --logdir (the same directory, on a "
                     "filesystem every worker sees, for every worker)")
    timeout = getattr(args, "worker_timeout", None) or DEFAULT_WORKER_TIMEOUT
    try:
        strategy = make_strategy(strategy_name, cpu_replicas=cpu_replicas,
                                 worker_timeout=timeout)
        result = distributed_run.train_under_strategy(
            settings, strategy, strategy_name, resume=resume,
            collection=getattr(args, "collection", None) or "parallel",
            cpu_replicas=cpu_replicas)
    except (TrainingError, WorkerLostError) as err:
        print_env_traceback(err)
        print(f"pgtwin train: error: {err}", file=sys.stderr, flush=True)
        if strategy_name == "multi-worker":
            # TF's collective runtime may block interpreter shutdown once a peer is gone;
            # the files are closed and the message is out, so leave now (bounded exit).
            sys.stdout.flush()
            os._exit(1)
        return 1
    except ValueError as err:
        return refused_or_failed(err, parser, f"setting up {settings.env_id} under "
                                 f"--strategy {strategy_name}")
    except KeyboardInterrupt:
        code = interrupted(settings, workers=strategy_name == "multi-worker")
        if strategy_name == "multi-worker":
            # As for a lost worker: TF's collective threads may still hold the interpreter
            # (a KeyboardInterrupt inside their pool then ended in a traceback); the
            # message is out, so leave now.
            sys.stdout.flush()
            os._exit(code)
        return code
    summary = {**result.summary(), "strategy": strategy_name,
               "num_replicas": int(strategy.num_replicas_in_sync)}
    if getattr(args, "json", False):
        print(json.dumps(summary), flush=True)
    else:
        print(human_summary(result), flush=True)
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
    written = [name for name in ("episodes.csv", "learning_curve.png", "tb/", "checkpoints/")
               if os.path.exists(os.path.join(result.logdir, name))]  # --no-tensorboard: no tb/
    lines.append(f"logs: {result.logdir} ({', '.join(written)})")
    return "\n".join(lines)


def skipped_line(result) -> str:
    """How many updates were skipped, and why (``RunResult.skipped_by_reason``)."""
    from pgtwin.train.skipped_updates import ADVICE

    why = "; ".join(f"{n} {reason.replace('_', ' ')} ({ADVICE[reason]})"
                    for reason, n in result.skipped_by_reason.items())
    untrained = (" - none was applied: the weights are the initial ones"
                 if result.skipped_updates == result.updates else "")
    return f"{result.skipped_updates} of {result.updates} updates skipped: {why}{untrained}"
