"""The one choice of an eager agent's update path, made when it is built. Mirrors
``legacy_graph/update_paths.py``.

Every path follows ``pgtwin_core.update_path.UpdatePath`` and runs the agent's
``WeightedLoss``; which one is read off the config once:

    baseline optimal_scalar                  OptimalScalarPath   (eager/optimal_scalar.py)
    baseline optimal_*_episodic / _param / _time
                                             EpisodicUpdate      (pgtwin_core.baselines)
    update_path cached                       CachedPath          (eager/cached.py)
    otherwise                                RecomputePath       (pgtwin_core.update_path)

The distributed agent picks its own (``eager/distributed.py``): the same ``EpisodicUpdate``
with an all-reduce as its reduce hook, ``eager/all_reduced.py`` for the per-step baselines.
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.baselines import EPISODIC, EpisodicUpdate
from pgtwin_core.update_path import RecomputePath, UpdatePath

from eager.cached import CachedPath
from eager.optimal_scalar import OptimalScalarPath
from eager.weighted_loss import WeightedLoss


def update_path(agent, weighted: WeightedLoss,
                forward: tf.types.experimental.GenericFunction) -> UpdatePath:
    """The update path ``agent.config`` asks for.

    Args:
      agent: an ``eager.agent.ReinforceAgent`` (its public attributes and methods).
      weighted: its ``WeightedLoss``.
      forward: its traced forward pass (the cached path records the rollout through it).
    """
    config = agent.config
    if config.baseline == "optimal_scalar":
        return OptimalScalarPath(agent)
    if config.baseline in EPISODIC:
        return EpisodicUpdate(config, agent.spec, weighted, agent.per_sample_gradients,
                              agent.dist_params)
    if config.update_path == "cached":
        return CachedPath(agent, weighted, forward)
    return RecomputePath(weighted, agent.inputs, agent.dist_params)
