"""Variance-minimising baselines built on a batch's episodes (numpy only, no TensorFlow).

Both twins and the distributed agent call this package with their own per-sample gradients,
so the formulas are written once; the twins only differentiate. ``g_i = grad log
pi(a_i|s_i)``; ``<.>`` is a mean over complete episodes. ``ReinforceConfig.baseline``::

    optimal_scalar           b* = sum_i w_i ||g_i||^2 R_i / sum_i w_i ||g_i||^2, per step
                             (the twins do it in TF; optimal_scalar.py is the reference)
    optimal_scalar_episodic  the same with g_e = sum_{t in e} g_t and R_e = sum_l gamma^l r_l
                             per complete episode e   (Greensmith, Bartlett & Baxter 2004)
    optimal_per_param        b_h = <g_h^2 R> / <g_h^2>, element h of the parameters;
                             ascent <g_h (R - b_h)>   (Peters & Schaal 2008)
    optimal_time             b_l^h = <psi_lh^2 a_l r_l> / <psi_lh^2>, psi the score so far
                             (Peters & Schaal 2008, GPOMDP)

Modules, one idea each: ``episodes`` (a batch cut into complete episodes), ``gradient_rows``
(per-sample gradients as rows, episode scores), ``optimal_scalar`` (per-step b*),
``leave_one_out`` (the episodic ratios over the other episodes and the memory),
``time_dependent`` (``optimal_time``), ``replica_sums`` (the reduce hook: identity on one
device), ``estimator`` (the estimate of a batch), ``episodic_update`` (the update path that
runs it). The decisions (leave-one-out, memory, complete episodes, padding, scale) and their
measurements are in docs/baselines.md.
"""
from pgtwin_core.baselines.episodes import Segments, segments
from pgtwin_core.baselines.episodic_update import EpisodicUpdate
from pgtwin_core.baselines.estimator import (EPISODIC, EpisodicEstimate, episodic_estimate,
                                             estimate, per_sample_method,
                                             skipped_update_metrics)
from pgtwin_core.baselines.gradient_rows import Grads, episode_scores, flatten, unflatten
from pgtwin_core.baselines.leave_one_out import (leave_one_out, loo_from_sums,
                                                 loo_scalar_baselines, per_param_ascent)
from pgtwin_core.baselines.optimal_scalar import optimal_scalar_baseline
from pgtwin_core.baselines.replica_sums import ONE_DEVICE, OneDevice, ReplicaSums
from pgtwin_core.baselines.time_dependent import (time_ascent, time_ascent_from_sums, time_psi,
                                                  time_sums)

__all__ = [
    "EPISODIC", "EpisodicEstimate", "EpisodicUpdate", "Grads", "ONE_DEVICE", "OneDevice",
    "ReplicaSums", "Segments", "episode_scores", "episodic_estimate",
    "estimate", "flatten", "leave_one_out", "loo_from_sums", "loo_scalar_baselines",
    "optimal_scalar_baseline", "per_param_ascent", "per_sample_method", "segments",
    "skipped_update_metrics", "time_ascent", "time_ascent_from_sums", "time_psi", "time_sums",
    "unflatten",
]
