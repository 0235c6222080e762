"""How much each baseline lowers the variance of the REINFORCE gradient estimate: a measurement.

For a fixed policy, many independent batches are collected (every batch starts from reset
envs with its own seed) and each baseline's estimate of the ascent direction (``-gradients``)
is computed on every batch. Reported per estimator: the trace of the covariance of the
estimate over batches, its standard error, and its excess over the mean baseline of the same
family and over the library's per-step ``mean``, paired batch by batch (the same batches feed
every estimator, which makes the difference far more precise than either trace):

* per step (``none``, ``mean``, ``optimal_scalar``): ``sum_i w_i g_i (R_i - b)``;
* episodic (``optimal_scalar_episodic``, ``optimal_per_param``, ``optimal_time``), against
  ``episodic_mean``: ``sum_e g_e (R_e - <R>_-e) / sum_e T_e`` over the complete episodes,
  the mean taken over the other episodes like the library's leave-one-out baselines;
  ``episodic_mean_memory``: the same with earlier batches' returns in the mean too
  (``(M_R + sum_{e' != e} R_e') / (M_E + E - 1)``, decayed like the library's memory).

The episodic estimators run the batches IN SEQUENCE through one stateful estimator each,
as training would (``pgtwin_core.baselines.episodic_estimate`` with the agent's per-sample
gradients and a ``BaselineMemory`` of ``ReinforceConfig.baseline_memory`` that takes in every
batch's sums, as an applied update does), the policy held fixed; the first ``warmup``
batches only fill the memories and are left out of the statistics.

Returns are not normalised (``normalize_returns=False``) so that every estimator estimates
the gradient itself. Run ``python -m pgtwin.measure.baseline_variance --help``; the figures of
docs/baselines.md come from it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

from pgtwin_core import baselines as bl
from pgtwin_core.baseline_memory import BaselineMemory
from pgtwin_core.config import BASELINES, ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import Batch, RolloutState, collect
from pgtwin_core.specs import PolicySpec, init_weights, spec_for_env
from pgtwin.twins import agent_class

FAMILIES = {"none": "mean", "mean": "mean", "optimal_scalar": "mean",
            "time_mean": "mean", "value_after": "mean", "value_before": "mean",
            "gpomdp_none": "gpomdp_mean", "gpomdp_mean": "gpomdp_mean",
            "gpomdp_time_mean": "gpomdp_mean", "gpomdp_value_after": "gpomdp_mean",
            "gpomdp_value_before": "gpomdp_mean",
            "episodic_mean": "episodic_mean", "episodic_mean_memory": "episodic_mean",
            "optimal_scalar_episodic": "episodic_mean", "optimal_per_param": "episodic_mean",
            "optimal_time": "episodic_mean"}
"""Each estimator's reference: the mean baseline of its own family. Families: per step
(reward-to-go, each step weighing 1), GPOMDP (``gpomdp_*``: step t weighing gamma^t) and
episodic; a variance ratio compares estimates of one expectation only within a family."""
ESTIMATORS = tuple(FAMILIES)
SHRINKABLE = ("optimal_scalar_episodic", "optimal_per_param")
"""Estimators that take a ``@LAMBDA`` suffix (``optimal_per_param@auto``,
``optimal_scalar_episodic@0.5``): ``ReinforceConfig.baseline_shrinkage`` = LAMBDA."""


def split_shrinkage(name: str) -> tuple[str, float | str | None]:
    """``"optimal_per_param@0.5"`` -> ``("optimal_per_param", 0.5)``; ``@auto`` -> ``"auto"``;
    a name without ``@`` -> ``(name, None)``. ``ValueError`` for a suffix on another
    estimator or a LAMBDA that is neither a number nor ``auto``."""
    base, at, value = name.partition("@")
    if not at:
        return name, None
    if base not in SHRINKABLE:
        raise ValueError(f"estimator {name!r}: only {SHRINKABLE} take a @LAMBDA suffix")
    return base, value if value == "auto" else float(value)


def family(name: str) -> str:
    """The reference (mean baseline) of estimator ``name``'s family (:data:`FAMILIES`)."""
    return FAMILIES[split_shrinkage(name)[0]]


def per_step_config(name: str, config: ReinforceConfig) -> ReinforceConfig | None:
    """The agent config of a per-step or GPOMDP estimator ``name`` (``gpomdp_`` prefix,
    ``value_after`` / ``value_before`` = ``baseline='value'`` with that ``value_fit``), or
    None for the episodic ones."""
    gpomdp = name.startswith("gpomdp_")
    baseline = name.removeprefix("gpomdp_")
    fit = {}
    if baseline.startswith("value_"):
        baseline, fit = "value", {"value_fit": baseline.removeprefix("value_")}
    if baseline not in BASELINES or baseline in bl.EPISODIC:
        return None
    return config.replace(baseline=baseline, gpomdp=gpomdp, **fit)


class _EpisodicMean:
    """Episodic REINFORCE with the mean baseline, ``sum_e g_e (R_e - <R>_-e) / sum_e T_e``.

    ``<R>_-e`` is the mean return of the other episodes (0 for a lone one): leave-one-out, as
    the library's episodic baselines are, so the comparison is like for like. (The plug-in
    mean over all E episodes includes R_e and shrinks the estimate by 1 - 1/E: lower variance
    bought with an O(1/E) bias.) With ``decay`` > 0 the earlier batches' returns join the
    mean: ``(M_R + sum_{e' != e} R_e') / (M_E + E - 1)``, ``M <- decay (M + this batch)``."""

    def __init__(self, decay: float = 0.0):
        self.decay, self.sum_r, self.count = decay, 0.0, 0.0

    def __call__(self, scores: np.ndarray, returns: np.ndarray, num_steps: int) -> np.ndarray:
        others = self.count + returns.size - 1
        mean = (self.sum_r + returns.sum() - returns) / others if others > 0 else 0 * returns
        self.sum_r = self.decay * (self.sum_r + returns.sum())
        self.count = self.decay * (self.count + returns.size)
        return np.sum(scores * (returns - mean)[:, None], axis=0) / num_steps


def _episodic_ascent(config: ReinforceConfig, spec: PolicySpec, batch: Batch,
                     grads: bl.Grads, memory: BaselineMemory) -> np.ndarray:
    """``[P]``: the library's episodic estimate (``config.baseline``) with ``memory``, which
    then takes in the batch's sums as an applied update would. ``grads``: the per-sample
    gradients of the complete episodes' steps (``Segments.episode_order`` rows)."""
    est = bl.episodic_estimate(batch, config, spec, lambda obs, actions: grads, memory)
    memory.add(est.sums)
    if est.ascent is not None:
        return bl.flatten({n: g[None] for n, g in est.ascent.items()})[0]
    # optimal_scalar_episodic: the ascent is sum_i w_i A_i g_i over the same rows (the
    # agent's update takes it as the gradient of its loss at these advantages and weights).
    used = bl.segments(batch, config.gamma).episode_order()
    coef = (est.inputs.weights.astype(np.float64) * est.inputs.advantages)[used]
    return coef @ bl.flatten(grads)


def gradient_estimates(spec: PolicySpec, config: ReinforceConfig, weights: dict[str, np.ndarray],
                       batches: list[Batch], impl: str = "graph",
                       estimators: tuple[str, ...] = ESTIMATORS) -> dict[str, np.ndarray]:
    """``{estimator: [num_batches, P]}``: each estimator's ascent direction on each batch.

    The batches run in order; the episodic estimators carry their memory of
    ``config.baseline_memory`` from batch to batch (module doc), the policy fixed."""
    per_step = [b for b in estimators if per_step_config(b, config) is not None]
    agents = {b: agent_class(impl)(spec, per_step_config(b, config), weights=weights)
              for b in per_step}
    scorer = agent_class(impl)(spec, config.replace(baseline="none"), weights=weights)
    method = bl.per_sample_method(scorer.spec.torso)
    memories = {b: BaselineMemory(config.baseline_memory) for b in estimators
                if split_shrinkage(b)[0] in bl.EPISODIC}
    means = {"episodic_mean": _EpisodicMean(), "episodic_mean_memory":
             _EpisodicMean(config.baseline_memory)}
    out: dict[str, list[np.ndarray]] = {b: [] for b in estimators}
    for batch in batches:
        for name in per_step:
            agent = agents[name]
            # A value baseline fitted before the estimate sees this batch; after, only the
            # earlier ones (then it takes this one in, as an update would).
            if agent.config.baseline == "value" and agent.config.value_fit == "before":
                agent.update_path.fit_on(batch)
            out[name].append(-bl.flatten({n: g[None] for n, g in agent.gradients(batch).items()})[0])
            if agent.config.baseline == "value" and agent.config.value_fit == "after":
                agent.update_path.fit_on(batch)
        if not set(estimators) - set(per_step):
            continue
        segs = bl.segments(batch, config.gamma)
        order = segs.episode_order()
        obs = batch.obs.reshape(-1, *batch.obs.shape[2:])[order].astype(config.dtype)
        actions = batch.actions.reshape(-1, *batch.actions.shape[2:])[order]
        grads = {n: np.array(g) for n, g in scorer.per_sample_gradients(obs, actions, method).items()}
        lengths = segs.lengths[segs.complete]
        scores = bl.episode_scores(bl.flatten(grads), lengths)
        for name in estimators:
            if name in means:
                out[name].append(means[name](scores, segs.returns[segs.complete], lengths.sum()))
            elif name in memories:
                base, shrinkage = split_shrinkage(name)
                out[name].append(_episodic_ascent(
                    config.replace(baseline=base, baseline_shrinkage=shrinkage), scorer.spec,
                    batch, grads, memories[name]))
    for agent in (*agents.values(), scorer):
        agent.close()
    return {name: np.stack(rows) for name, rows in out.items()}


def _enough_rows(n: int, what: str) -> None:
    """A covariance over ``n`` batches and its standard error need ``n >= 2`` (they divide
    by ``n - 1``: one row gave NaN)."""
    if n < 2:
        raise ValueError(f"{what} needs the estimates of at least 2 batches (rows), got {n}")


def trace_of_covariance(x: np.ndarray) -> tuple[float, float]:
    """``(tr Cov, standard error)`` of the rows of ``x [n, P]`` (unbiased, n - 1; n >= 2)."""
    n = x.shape[0]
    _enough_rows(n, "trace_of_covariance")
    d = np.sum((x - x.mean(axis=0)) ** 2, axis=1) * n / (n - 1)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))


def paired_excess(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(tr Cov(x) - tr Cov(y), standard error)`` over the same batches (paired; n >= 2)."""
    n = x.shape[0]
    _enough_rows(n, "paired_excess")
    d = (np.sum((x - x.mean(0)) ** 2, axis=1) - np.sum((y - y.mean(0)) ** 2, axis=1)) * n / (n - 1)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))


REFERENCES = ("episodic_mean", "episodic_mean_memory", "mean")
"""What every episodic estimator is compared with: the batch-only and the memory mean of
its family, and the library's per-step ``mean``."""


@dataclass(frozen=True)
class Row:
    """One estimator's line of the report."""

    estimator: str
    trace: float
    trace_se: float
    excess: float
    """tr Cov minus that of the family's mean baseline (paired), and its standard error:"""
    excess_se: float
    mean_norm: float
    """``||mean estimate||``: how large the gradient itself is, for scale."""
    versus: dict = None
    """``{reference: (ratio of traces, paired excess, its s.e.)}`` for ``REFERENCES``."""
    efficiency: tuple[float, float] | None = None
    """``(efficiency, bootstrap s.e.)`` against a reference gradient (:func:`efficiency`),
    if one was measured."""


def report(estimates: dict[str, np.ndarray], warmup: int = 0,
           reference: np.ndarray | None = None) -> list[Row]:
    """The rows for ``estimates`` (each estimator against its family's mean baseline, and
    the episodic ones against every ``REFERENCES``), leaving out the first ``warmup``
    batches; with ``reference`` (``[R, P]`` estimates of the exact gradient,
    :func:`reference_estimates`) each row's :func:`efficiency` too."""
    estimates = {name: x[warmup:] for name, x in estimates.items()}
    rows = []
    for name, x in estimates.items():
        ref = family(name)
        excess, excess_se = paired_excess(x, estimates[ref]) if ref in estimates else (np.nan, np.nan)
        trace = trace_of_covariance(x)
        refs = REFERENCES if ref == "episodic_mean" else ("mean",)
        versus = {r: (trace[0] / trace_of_covariance(estimates[r])[0], *paired_excess(x, estimates[r]))
                  for r in refs if r in estimates}
        eff = None if reference is None else efficiency(x, reference)
        rows.append(Row(name, *trace, excess, excess_se, float(np.linalg.norm(x.mean(axis=0))),
                        versus, eff))
    return rows


def efficiency(x: np.ndarray, reference: np.ndarray, resamples: int = 200,
               seed: int = 0) -> tuple[float, float]:
    """``(eff, bootstrap s.e.)``: the fraction of the exact gradient's best one-step
    improvement that a step along the estimate achieves.

    For a step ``a g_hat`` on a smooth objective J with curvature L, the expected gain
    ``a grad·E[g_hat] - (L/2) a^2 E||g_hat||^2`` is at most
    ``(grad·E[g_hat])^2 / (2 L E||g_hat||^2)``; the exact gradient's best is
    ``||grad||^2 / (2 L)``. Their ratio, in [0, 1], charges bias and variance alike and
    does not depend on the estimate's scale, so it compares estimators of different
    expectations (per step, GPOMDP, episodic)::

        eff = (grad · mean_k x_k)^2 / (||grad||^2 mean_k ||x_k||^2)

    ``grad · mean x`` from the reference's mean (independent batches: unbiased), ``||grad||^2``
    by the pair statistic ``(||sum r||^2 - sum ||r||^2) / (R (R - 1))`` (unbiased; the mean's
    own square would add tr Cov / R).

    Args:
      x: ``[n, P]`` the estimator's ascent estimates on n batches.
      reference: ``[R, P]`` unbiased estimates of the exact gradient, on other batches.
      resamples: bootstrap resamples of both (their rows) for the standard error.
    """
    def value(x, r):
        total = r.sum(axis=0)
        sq = (total @ total - np.sum(r * r)) / (r.shape[0] * (r.shape[0] - 1))
        dot = (total / r.shape[0]) @ x.mean(axis=0)
        return dot ** 2 / (sq * np.mean(np.sum(x * x, axis=1)))

    rng = np.random.default_rng(seed)
    boot = [value(x[rng.integers(0, len(x), len(x))],
                  reference[rng.integers(0, len(reference), len(reference))])
            for _ in range(resamples)]
    return float(value(x, reference)), float(np.std(boot, ddof=1))


def first_episodes(batch: Batch) -> Batch:
    """``batch`` cut to each env's first episode: the steps after its end are marked
    invalid (as autoreset steps), their rewards and flags cleared.

    From envs reset at the batch's start with T at least the time limit, every env's first
    episode is complete and drawn from the start distribution, so a GPOMDP estimate over
    them is unbiased for the discounted objective's gradient. Raises ``ValueError`` if an
    env's first episode does not end inside the batch."""
    ended = (batch.terminated | batch.truncated) & batch.valid
    if not ended.any(axis=0).all():
        n = int(np.flatnonzero(~ended.any(axis=0))[0])
        raise ValueError(f"env {n}'s first episode does not end within T={batch.num_steps} "
                         "steps: give the reference batches at least the env's time limit")
    first_end = np.argmax(ended, axis=0)                       # [N]
    keep = np.arange(batch.num_steps)[:, None] <= first_end[None, :]
    order = np.lexsort((np.arange(batch.num_envs), first_end))  # rollout order: t, then env
    steps = None if batch.episode_steps is None else np.where(keep, batch.episode_steps, -1)
    return Batch(obs=batch.obs, actions=batch.actions, rewards=np.where(keep, batch.rewards, 0.0),
                 terminated=batch.terminated & keep, truncated=batch.truncated & keep,
                 log_probs=batch.log_probs, valid=batch.valid & keep, next_obs=batch.next_obs,
                 episode_returns=np.zeros(batch.num_envs),
                 episode_lengths=(first_end + 1)[order].astype(np.int64), params=None,
                 env_steps=batch.env_steps, episode_steps=steps)


def reference_estimates(spec: PolicySpec, config: ReinforceConfig,
                        weights: dict[str, np.ndarray], batches: list[Batch],
                        impl: str = "graph") -> np.ndarray:
    """``[R, P]``: unbiased estimates of the exact gradient of the discounted objective
    ``J = E[sum_t gamma^t r_t]``, one per batch: GPOMDP with the per-time leave-one-out
    mean over each env's first episode (:func:`first_episodes`), per episode
    (``(1 / N) sum_e sum_t gamma^t g_t (G_t - b_t)``)."""
    agent = agent_class(impl)(spec, config.replace(baseline="time_mean", gpomdp=True),
                              weights=weights)
    rows = []
    for batch in batches:
        cut = first_episodes(batch)
        grads = agent.gradients(cut)  # of -sum_i w_i A_i log pi, w_i = 1 / num_valid
        rows.append(-bl.flatten({n: g[None] for n, g in grads.items()})[0]
                    * cut.num_valid / cut.num_envs)
    agent.close()
    return np.stack(rows)


def to_markdown(rows: list[Row]) -> str:
    """A markdown table of ``rows``: ratio of traces and paired excess (± s.e.) against
    each of ``REFERENCES``."""
    with_eff = any(r.efficiency is not None for r in rows)
    lines = ["| estimator | tr Cov | ± s.e. | vs its family's mean: ratio, excess ± s.e. | "
             + " | ".join(f"vs `{r}`: ratio, excess ± s.e." for r in REFERENCES)
             + (" | efficiency ± s.e. |" if with_eff else " |"),
             "|---|---|---|---|" + "---|" * (len(REFERENCES) + with_eff)]
    for r in rows:
        cells = []
        for ref in REFERENCES:
            if ref not in r.versus or ref == r.estimator:
                cells.append("—")
            else:
                ratio, excess, se = r.versus[ref]
                cells.append(f"{ratio:.3f}, {excess:+.3g} ± {se:.2g}")
        own_family = family(r.estimator)
        own = ("—" if own_family == r.estimator or np.isnan(r.excess) else
               f"{r.trace / (r.trace - r.excess):.3f}, {r.excess:+.3g} ± {r.excess_se:.2g}")
        eff = (f" | {r.efficiency[0]:.3f} ± {r.efficiency[1]:.3f}" if with_eff and r.efficiency
               else (" | —" if with_eff else ""))
        lines.append(f"| {r.estimator} | {r.trace:.4g} | {r.trace_se:.2g} | {own} | "
                     + " | ".join(cells) + eff + " |")
    return "\n".join(lines)


def independent_batches(env_id: str, spec: PolicySpec, policy_fn, num_batches: int,
                        num_envs: int, num_steps: int, seed: int = 0, history: int = 1) -> list[Batch]:
    """``num_batches`` batches, each from envs reset with its own seeds and its own action RNG."""
    envs = make_vec_env(env_id, num_envs, seed=seed, history=history)
    try:
        batches = []
        for k in range(num_batches):
            state = RolloutState.start(envs, seed=seed + 1000 * (k + 1))
            batch, _ = collect(envs, policy_fn, spec, num_steps, np.random.default_rng(seed + k),
                               state)
            batches.append(batch)
        return batches
    finally:
        envs.close()


def measure(env_id: str, num_batches: int, num_envs: int, num_steps: int, gamma: float = 0.99,
            hidden: tuple[int, ...] = (64, 64), seed: int = 0, impl: str = "graph",
            memory: float = ReinforceConfig.baseline_memory, warmup: int = 20,
            estimators: tuple[str, ...] = ESTIMATORS, weights: dict[str, np.ndarray] | None = None,
            reference_batches: int = 0, reference_steps: int | None = None,
            value: dict | None = None, first_only: bool = False) -> list[Row]:
    """The report for ``env_id`` under a fixed policy: ``weights`` (e.g. a run's
    ``weights.npz``), else the initial one (``init_weights(spec, seed, dtype=...)``);
    ``num_batches`` batches, the first ``warmup`` of them only filling the memories and
    fitting the value nets. ``reference_batches`` > 0: that many more batches of
    ``reference_steps`` (default: the env's time limit) give the reference gradient of
    every row's efficiency. ``value``: ``ReinforceConfig`` fields of the value baseline
    (``value_fit_steps``, ``value_learning_rate`` ...); its ``value_horizon`` is the env's
    time limit. ``first_only``: every batch cut to its envs' first episodes
    (:func:`first_episodes`), so that every estimator sees complete episodes only."""
    from pgtwin.train.settings import max_episode_steps

    envs = make_vec_env(env_id, 1, seed=seed)
    spec = spec_for_env(envs, hidden=hidden)
    envs.close()
    limit = max_episode_steps(env_id) or 0
    config = ReinforceConfig(gamma=gamma, normalize_returns=False, num_envs=num_envs,
                             num_steps=num_steps, baseline_memory=memory,
                             **{"value_horizon": limit, **(value or {})})
    weights = init_weights(spec, seed, dtype=config.dtype) if weights is None else weights
    policy = agent_class(impl)(spec, config, weights=weights)
    batches = independent_batches(env_id, spec, policy.dist_params, num_batches, num_envs,
                                  num_steps, seed)
    if first_only:
        batches = [first_episodes(b) for b in batches]
    reference = None
    if reference_batches:
        steps = reference_steps or limit
        if not steps:
            raise ValueError(f"{env_id} has no time limit: give reference_steps")
        reference = reference_estimates(
            spec, config, weights,
            independent_batches(env_id, spec, policy.dist_params, reference_batches, num_envs,
                                steps, seed + 10 ** 6), impl)
    policy.close()
    return report(gradient_estimates(spec, config, weights, batches, impl, estimators), warmup,
                  reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pgtwin.measure.baseline_variance",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--impl", choices=("graph", "eager"), default="graph")
    parser.add_argument("--hidden", default="64,64", help="the policy's hidden sizes")
    parser.add_argument("--memory", type=float, default=ReinforceConfig.baseline_memory,
                        help="ReinforceConfig.baseline_memory of the episodic estimators")
    parser.add_argument("--warmup", type=int, default=20,
                        help="first batches that only fill the memories and fit the value "
                             "nets (not in the statistics)")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS),
                        help=f"comma-separated, of {', '.join(ESTIMATORS)}; "
                             f"{', '.join(SHRINKABLE)} also as NAME@LAMBDA (LAMBDA in [0, 1] "
                             "or auto: ReinforceConfig.baseline_shrinkage)")
    parser.add_argument("--weights", default=None,
                        help="an .npz of policy weights (a run's weights.npz); default the "
                             "initial policy")
    parser.add_argument("--reference-batches", type=int, default=0,
                        help="batches of the reference gradient for the efficiency column "
                             "(0: none)")
    parser.add_argument("--reference-steps", type=int, default=None,
                        help="T of the reference batches (default the env's time limit)")
    parser.add_argument("--first-episodes", action="store_true",
                        help="cut every batch to its envs' first episodes (complete when T is "
                             "at least the time limit): no estimator sees a cut episode")
    parser.add_argument("--value-fit-steps", type=int, default=ReinforceConfig.value_fit_steps)
    parser.add_argument("--value-lr", type=float, default=ReinforceConfig.value_learning_rate)
    args = parser.parse_args(argv)
    if not 0 <= args.warmup <= args.batches - 2:
        parser.error(f"--warmup {args.warmup} must be in [0, --batches - 2 = {args.batches - 2}]")
    estimators = tuple(e for e in args.estimators.split(",") if e)
    try:
        unknown = [e for e in estimators if split_shrinkage(e)[0] not in FAMILIES]
    except ValueError as err:
        parser.error(f"--estimators: {err}")
    if unknown:
        parser.error(f"--estimators: unknown {unknown}; choose from {', '.join(ESTIMATORS)}"
                     f" ({', '.join(SHRINKABLE)} also as NAME@LAMBDA, LAMBDA a number in "
                     "[0, 1] or auto: baseline_shrinkage)")
    hidden = tuple(int(h) for h in args.hidden.split(","))
    # weights.npz keys spell the scopes with "__" (policy__dense_0__kernel).
    weights = (None if args.weights is None else
               {k.replace("__", "/"): v for k, v in np.load(args.weights).items()})
    start = time.perf_counter()
    rows = measure(args.env, args.batches, args.num_envs, args.num_steps, args.gamma,
                   hidden=hidden, seed=args.seed, impl=args.impl, memory=args.memory,
                   warmup=args.warmup, estimators=estimators, weights=weights,
                   reference_batches=args.reference_batches,
                   reference_steps=args.reference_steps,
                   value={"value_fit_steps": args.value_fit_steps,
                          "value_learning_rate": args.value_lr},
                   first_only=args.first_episodes)
    print(f"{args.env}: {args.batches} batches of N={args.num_envs} x T={args.num_steps} "
          f"({args.warmup} warm-up left out), gamma={args.gamma}, baseline_memory="
          f"{args.memory}, policy {args.weights or f'initial (seed {args.seed})'}, "
          f"{args.impl} twin, reference {args.reference_batches} batches, "
          f"{'first episodes only, ' if args.first_episodes else ''}"
          f"{time.perf_counter() - start:.0f} s\n")
    print(to_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
