"""Is ``baseline_shrinkage='auto'``'s variance estimate right? A measurement.

``auto`` (``pgtwin_core/baselines/shrinkage.py``) shrinks by ``lambda = min(1, V / d^2)``,
``d = b^(-e) - m^(-e)`` the ratio's difference from the mean and V its first-order variance
from the other episodes. Here, batch only (no memory) and the scalar form
(``optimal_scalar_episodic``), each of many independent batches gives episode 0's ``d`` and
``V``; their spread over the batches is the truth V estimates: the report compares the mean
of V with the variance of d, and shows the lambdas ``auto`` takes. The policy is held fixed
(``init_weights(spec, seed)``), batches as ``pgtwin.measure.baseline_variance``'s.
Run ``python -m pgtwin.measure.shrinkage_check --help``; docs/baselines.md has the figures.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


def first_episode_d_and_v(scores: np.ndarray, returns: np.ndarray) -> tuple[float, float] | None:
    """``(d, V)`` of episode 0 from episodes 1.. (scores ``[E, P]``, returns ``[E]``), no
    memory: ``d = b - m``, ``b = sum n R / sum n`` (n = ||g||^2), ``m`` the mean return,
    ``V = sum z^2 / ((k - 1) k)``, ``z = (n / nbar)(R - b) - (R - m)`` over the k others;
    None below 2 others (``auto`` then takes lambda = 1)."""
    n = np.sum(np.asarray(scores[1:], np.float64) ** 2, axis=1)
    r = np.asarray(returns[1:], np.float64)
    k = r.size
    if k < 2:
        return None
    b, m = float(n @ r / n.sum()), float(r.mean())
    z = n / n.mean() * (r - b) - (r - m)
    return b - m, float(z @ z / ((k - 1) * k))


def measure(env_id: str, num_batches: int, num_envs: int, num_steps: int,
            gamma: float = 0.99, seed: int = 0) -> dict[str, float]:
    """The report's figures (``main``) for ``num_batches`` batches of ``env_id``."""
    from pgtwin_core import baselines as bl
    from pgtwin_core.config import ReinforceConfig
    from pgtwin_core.envs import make_vec_env
    from pgtwin_core.specs import init_weights, spec_for_env
    from pgtwin.measure.baseline_variance import independent_batches
    from pgtwin.twins import agent_class

    envs = make_vec_env(env_id, 1, seed=seed)
    spec = spec_for_env(envs, hidden=(64, 64))
    envs.close()
    config = ReinforceConfig(gamma=gamma, normalize_returns=False, num_envs=num_envs,
                             num_steps=num_steps)
    agent = agent_class("graph")(spec, config, weights=init_weights(spec, seed,
                                                                    dtype=config.dtype))
    pairs, others = [], []
    for batch in independent_batches(env_id, spec, agent.dist_params, num_batches, num_envs,
                                     num_steps, seed):
        segs = bl.segments(batch, gamma)
        order = segs.episode_order()
        obs = batch.obs.reshape(-1, *batch.obs.shape[2:])[order].astype(config.dtype)
        actions = batch.actions.reshape(-1, *batch.actions.shape[2:])[order]
        grads = agent.per_sample_gradients(obs, actions, bl.per_sample_method(spec.torso))
        scores = bl.episode_scores(bl.flatten({k: np.array(g) for k, g in grads.items()}),
                                   segs.lengths[segs.complete])
        got = first_episode_d_and_v(scores, segs.returns[segs.complete])
        if got is not None:
            pairs.append(got)
            others.append(int(segs.complete.sum()) - 1)
    agent.close()
    d, v = (np.array(x) for x in zip(*pairs))
    lam = np.minimum(1.0, v / np.maximum(d ** 2, 1e-300))
    return {"batches": len(d), "others": float(np.mean(others)), "mean_d": float(d.mean()),
            "var_d": float(d.var(ddof=1)), "mean_v": float(v.mean()),
            "median_v": float(np.median(v)), "lambda_mean": float(lam.mean()),
            "lambda_at_1": float(np.mean(lam >= 1.0))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pgtwin.measure.shrinkage_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="BatteryArbitrage-v0")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=169)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    r = measure(args.env, args.batches, args.num_envs, args.num_steps, seed=args.seed)
    print(f"{args.env}: {r['batches']} batches of N={args.num_envs} x T={args.num_steps}, "
          f"{r['others']:.1f} other episodes on average\n"
          f"d = b - m: mean {r['mean_d']:.3g}, variance over batches {r['var_d']:.4g}\n"
          f"V: mean {r['mean_v']:.4g} ({r['mean_v'] / r['var_d']:.3f} of that variance), "
          f"median {r['median_v']:.4g}\n"
          f"auto's lambda: mean {r['lambda_mean']:.3f}, at 1 in {r['lambda_at_1']:.0%} of "
          "the batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
