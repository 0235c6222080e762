"""Which update path a config asks for, chosen once when an agent is built (no TensorFlow here).

::

    baseline optimal_scalar                 "optimal_scalar"  the twins' OptimalScalarPath
    an episodic baseline (EPISODIC)         "episodic"        the twins' episodic path (TensorFlow,
                                                              pgtwin_core.baselines.LayoutPath), or
                                                              pgtwin_core.baselines.EpisodicUpdate
    baseline value                          "value"           pgtwin_core.value_path over the twin's ValueNet
    update_path cached                      "cached"          the twins' CachedPath
    otherwise                               "recompute"       pgtwin_core.update_path.RecomputePath

Each twin's ``update_paths.py`` hands ``chosen_path`` the builders of its own two paths.
With ``config.natural_kl`` the shared paths (recompute, value) train through
``pgtwin_core.natural_gradient.NaturalGradientLoss`` over the twin's loss; the config
refuses it with the twins' own paths.
"""
from __future__ import annotations

from typing import Callable

from pgtwin_core.baselines import EPISODIC, EpisodicUpdate
from pgtwin_core.baselines.estimator import per_sample_method
from pgtwin_core.natural_gradient import NaturalGradientLoss, NaturalStepPath
from pgtwin_core.update_path import RecomputePath, UpdatePath, WeightedLoss
from pgtwin_core.value_path import ValueNet, value_path


def path_kind(config) -> str:
    """Which update path ``config`` (a ``ReinforceConfig``) asks for (module doc)."""
    if config.baseline == "optimal_scalar":
        return "optimal_scalar"
    if config.baseline in EPISODIC:
        return "episodic"
    if config.baseline == "value":
        return "value"
    return "cached" if config.update_path == "cached" else "recompute"


def chosen_path(agent, weighted: WeightedLoss, optimal_scalar: Callable[[], UpdatePath],
                cached: Callable[[], UpdatePath],
                episodic: Callable[[], UpdatePath] | None = None,
                value_net: Callable[[], ValueNet] | None = None) -> UpdatePath:
    """The update path ``agent.config`` asks for: the shared ones built here (over the twin's
    ``weighted`` loss and the agent's public ``per_sample_gradients``, ``inputs`` and
    ``dist_params``), the twin's own by the callables it passes. ``episodic``: the twin's
    TensorFlow path of the episodic baselines; without it, the numpy ``EpisodicUpdate``.
    ``value_net``: builds the twin's value network (``baseline='value'``)."""
    if agent.config.natural_kl is None:
        return _path(agent, weighted, optimal_scalar, cached, episodic, value_net)
    natural = NaturalGradientLoss(weighted, agent, per_sample_method(agent.spec.torso),
                                  agent.config)
    return NaturalStepPath(_path(agent, natural, optimal_scalar, cached, episodic, value_net),
                           natural)


def _path(agent, weighted: WeightedLoss, optimal_scalar: Callable[[], UpdatePath],
          cached: Callable[[], UpdatePath], episodic: Callable[[], UpdatePath] | None,
          value_net: Callable[[], ValueNet] | None) -> UpdatePath:
    """:func:`chosen_path` over a given ``weighted`` loss."""
    kind = path_kind(agent.config)
    if kind == "optimal_scalar":
        return optimal_scalar()
    if kind == "episodic" and episodic is not None:
        return episodic()
    if kind == "episodic":
        return EpisodicUpdate(agent.config, agent.spec, weighted, agent.per_sample_gradients,
                              agent.dist_params)
    if kind == "value":
        return value_path(agent, weighted, value_net)
    if kind == "cached":
        return cached()
    return RecomputePath(weighted, agent.inputs, agent.dist_params)
