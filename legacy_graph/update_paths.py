"""The one choice of a graph agent's update path, made when it is built. Mirrors
``eager/update_paths.py``.

Every path follows ``pgtwin_core.update_path.UpdatePath`` and runs the agent's
``WeightedLoss``; which one is read off the config once:

    baseline optimal_scalar                  OptimalScalarPath   (legacy_graph/optimal_scalar.py)
    baseline optimal_*_episodic / _param / _time
                                             EpisodicUpdate      (pgtwin_core.baselines)
    update_path cached                       CachedPath          (legacy_graph/cached.py)
    otherwise                                RecomputePath       (pgtwin_core.update_path)
"""
from __future__ import annotations

from pgtwin_core.baselines import EPISODIC, EpisodicUpdate
from pgtwin_core.update_path import RecomputePath, UpdatePath

from legacy_graph.cached import CachedPath
from legacy_graph.optimal_scalar import OptimalScalarPath
from legacy_graph.weighted_loss import WeightedLoss


def update_path(agent, weighted: WeightedLoss) -> UpdatePath:
    """The update path ``agent.config`` asks for, built in the agent's graph.

    Args:
      agent: a ``legacy_graph.agent.ReinforceAgent`` whose graph and session exist.
      weighted: its ``WeightedLoss``.
    """
    config = agent.config
    if config.baseline == "optimal_scalar":
        return OptimalScalarPath(agent)
    if config.baseline in EPISODIC:
        return EpisodicUpdate(config, agent.spec, weighted, agent.per_sample_gradients,
                              agent.dist_params)
    if config.update_path == "cached":
        return CachedPath(agent, weighted)
    return RecomputePath(weighted, agent.inputs, agent.dist_params)
