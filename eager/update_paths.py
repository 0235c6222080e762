"""The one choice of the eager agent's update path, made when it is built
(``pgtwin_core.path_choice`` reads it off the config). Mirrors
``legacy_graph/update_paths.py``.

The distributed agent picks its own (``eager/distributed.py``): the same ``EpisodicUpdate``
with an all-reduce as its reduce hook, ``eager/all_reduced.py`` for the per-step baselines.
"""
from __future__ import annotations

import tensorflow as tf

from pgtwin_core.path_choice import chosen_path
from pgtwin_core.update_path import UpdatePath

from eager.cached import CachedPath
from eager.episodic_path import episodic_path
from eager.optimal_scalar import OptimalScalarPath
from eager.value_net import agent_value_net
from eager.weighted_loss import WeightedLoss


def update_path(agent, weighted: WeightedLoss,
                forward: tf.types.experimental.GenericFunction) -> UpdatePath:
    """The update path ``agent.config`` asks for, built with the agent.

    Args:
      agent: an ``eager.agent.ReinforceAgent`` (its public attributes and methods).
      weighted: its ``WeightedLoss``.
      forward: its traced forward pass (the cached path records the rollout through it).
    """
    return chosen_path(agent, weighted, lambda: OptimalScalarPath(agent),
                       lambda: CachedPath(agent, weighted, forward), lambda: episodic_path(agent),
                       value_net=lambda: agent_value_net(agent))
