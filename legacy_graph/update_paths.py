"""The one choice of the graph agent's update path, made when it is built
(``pgtwin_core.path_choice`` reads it off the config). Mirrors
``eager/update_paths.py``.
"""
from __future__ import annotations

from pgtwin_core.path_choice import chosen_path
from pgtwin_core.update_path import UpdatePath

from legacy_graph.cached import CachedPath
from legacy_graph.episodic_path import episodic_path
from legacy_graph.optimal_scalar import OptimalScalarPath
from legacy_graph.value_net import agent_value_net
from legacy_graph.weighted_loss import WeightedLoss


def update_path(agent, weighted: WeightedLoss) -> UpdatePath:
    """The update path ``agent.config`` asks for, built in the agent's graph.

    Args:
      agent: a ``legacy_graph.agent.ReinforceAgent`` whose graph and session exist.
      weighted: its ``WeightedLoss``.
    """
    return chosen_path(agent, weighted, lambda: OptimalScalarPath(agent),
                       lambda: CachedPath(agent, weighted), lambda: episodic_path(agent),
                       value_net=lambda: agent_value_net(agent))
