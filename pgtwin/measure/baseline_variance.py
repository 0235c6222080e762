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
            "episodic_mean": "episodic_mean", "episodic_mean_memory": "episodic_mean",
            "optimal_scalar_episodic": "episodic_mean", "optimal_per_param": "episodic_mean",
            "optimal_time": "episodic_mean"}
"""Each estimator's reference: the mean baseline of its own family."""
ESTIMATORS = tuple(FAMILIES)


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
    per_step = [b for b in estimators if b in BASELINES and b not in bl.EPISODIC]
    agents = {b: agent_class(impl)(spec, config.replace(baseline=b), weights=weights)
              for b in per_step}
    scorer = agent_class(impl)(spec, config.replace(baseline="none"), weights=weights)
    method = bl.per_sample_method(scorer.spec.torso)
    memories = {b: BaselineMemory(config.baseline_memory) for b in bl.EPISODIC}
    means = {"episodic_mean": _EpisodicMean(), "episodic_mean_memory":
             _EpisodicMean(config.baseline_memory)}
    out: dict[str, list[np.ndarray]] = {b: [] for b in estimators}
    for batch in batches:
        for name in per_step:
            out[name].append(-bl.flatten({n: g[None] for n, g in agents[name].gradients(batch).items()})[0])
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
            elif name in bl.EPISODIC:
                out[name].append(_episodic_ascent(config.replace(baseline=name), scorer.spec,
                                                  batch, grads, memories[name]))
    for agent in (*agents.values(), scorer):
        agent.close()
    return {name: np.stack(rows) for name, rows in out.items()}


def trace_of_covariance(x: np.ndarray) -> tuple[float, float]:
    """``(tr Cov, standard error)`` of the rows of ``x [n, P]`` (unbiased, n - 1)."""
    n = x.shape[0]
    d = np.sum((x - x.mean(axis=0)) ** 2, axis=1) * n / (n - 1)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))


def paired_excess(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(tr Cov(x) - tr Cov(y), standard error)`` over the same batches (paired)."""
    n = x.shape[0]
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


def report(estimates: dict[str, np.ndarray], warmup: int = 0) -> list[Row]:
    """The rows for ``estimates`` (each estimator against its family's mean baseline, and
    the episodic ones against every ``REFERENCES``), leaving out the first ``warmup``
    batches."""
    estimates = {name: x[warmup:] for name, x in estimates.items()}
    rows = []
    for name, x in estimates.items():
        ref = FAMILIES[name]
        excess, excess_se = paired_excess(x, estimates[ref]) if ref in estimates else (np.nan, np.nan)
        trace = trace_of_covariance(x)
        refs = REFERENCES if ref == "episodic_mean" else ("mean",)
        versus = {r: (trace[0] / trace_of_covariance(estimates[r])[0], *paired_excess(x, estimates[r]))
                  for r in refs if r in estimates}
        rows.append(Row(name, *trace, excess, excess_se, float(np.linalg.norm(x.mean(axis=0))),
                        versus))
    return rows


def to_markdown(rows: list[Row]) -> str:
    """A markdown table of ``rows``: ratio of traces and paired excess (± s.e.) against
    each of ``REFERENCES``."""
    lines = ["| estimator | tr Cov | ± s.e. | " + " | ".join(f"vs `{r}`: ratio, excess ± s.e."
                                                        for r in REFERENCES) + " |",
             "|---|---|---|" + "---|" * len(REFERENCES)]
    for r in rows:
        cells = []
        for ref in REFERENCES:
            if ref not in r.versus or ref == r.estimator:
                cells.append("—")
            else:
                ratio, excess, se = r.versus[ref]
                cells.append(f"{ratio:.3f}, {excess:+.3g} ± {se:.2g}")
        lines.append(f"| {r.estimator} | {r.trace:.4g} | {r.trace_se:.2g} | " + " | ".join(cells) + " |")
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
            memory: float = ReinforceConfig.baseline_memory, warmup: int = 20) -> list[Row]:
    """The report for ``env_id`` under its initial policy (``init_weights(spec, seed, dtype=...)``):
    ``num_batches`` batches, the first ``warmup`` of them only filling the memories."""
    envs = make_vec_env(env_id, 1, seed=seed)
    spec = spec_for_env(envs, hidden=hidden)
    envs.close()
    config = ReinforceConfig(gamma=gamma, normalize_returns=False, num_envs=num_envs,
                             num_steps=num_steps, baseline_memory=memory)
    weights = init_weights(spec, seed, dtype=config.dtype)
    policy = agent_class(impl)(spec, config, weights=weights)
    batches = independent_batches(env_id, spec, policy.dist_params, num_batches, num_envs,
                                  num_steps, seed)
    policy.close()
    return report(gradient_estimates(spec, config, weights, batches, impl), warmup)


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
    parser.add_argument("--memory", type=float, default=ReinforceConfig.baseline_memory,
                        help="ReinforceConfig.baseline_memory of the episodic estimators")
    parser.add_argument("--warmup", type=int, default=20,
                        help="first batches that only fill the memories (not in the statistics)")
    args = parser.parse_args(argv)
    if not 0 <= args.warmup <= args.batches - 2:
        parser.error(f"--warmup {args.warmup} must be in [0, --batches - 2 = {args.batches - 2}]")
    start = time.perf_counter()
    rows = measure(args.env, args.batches, args.num_envs, args.num_steps, args.gamma,
                   seed=args.seed, impl=args.impl, memory=args.memory, warmup=args.warmup)
    print(f"{args.env}: {args.batches} batches of N={args.num_envs} x T={args.num_steps} "
          f"({args.warmup} warm-up left out), gamma={args.gamma}, baseline_memory="
          f"{args.memory}, initial policy (seed {args.seed}), {args.impl} twin, "
          f"{time.perf_counter() - start:.0f} s\n")
    print(to_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
