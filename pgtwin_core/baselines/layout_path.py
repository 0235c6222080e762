"""The update path of the episodic baselines computed in TensorFlow, the Python both twins share.

An ``UpdatePath`` (``pgtwin_core.update_path``). Each twin builds one computation per update
over the grid of ``episode_layout`` (``pgtwin/mode_agnostic/episodic_baselines.py``: scores,
sums, leave-one-out ratios, ascent, the optimizer step and the memory's update) and hands
this class its callables; what is left here is the integer bookkeeping, the argument order
and the metrics. The numpy estimator (``EpisodicUpdate``) stays the reference the tests
compare against, and the distributed agent's path.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np

from pgtwin_core.baseline_memory import HeldMemory
from pgtwin_core.baselines.episode_layout import EpisodeLayout, episode_layout
from pgtwin_core.baselines.estimator import skipped_update_metrics
from pgtwin_core.config import SHRINKABLE_BASELINES
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.rollout import Batch
from pgtwin_core.update_path import PolicyFn

MIN_EPISODES = 32
"""Below this many complete episodes a batch, a ratio baseline estimated from the other
episodes adds more variance than it removes on the envs measured (docs/baselines.md,
"When the episodic baselines pay off"): the path warns once, for ``optimal_scalar_episodic``
and ``optimal_per_param`` without ``baseline_shrinkage`` (``optimal_time`` paid off at 8
episodes; shrinkage is the fix). A warning, not a refusal: the estimate stays unbiased."""


class FewEpisodesWarning(UserWarning):
    """An episodic optimal baseline fitted on fewer than ``MIN_EPISODES`` episodes a batch."""


def warns_below_min_episodes(config) -> bool:
    """Whether ``config``'s baseline is one the few-episodes warning is about."""
    return config.baseline in SHRINKABLE_BASELINES and not config.baseline_shrinkage


def few_episodes_message(baseline: str, num_episodes: int, memory: float,
                         num_envs: int | None = None, num_steps: int | None = None) -> str:
    """What :class:`FewEpisodesWarning` says: the count, why it matters and the fixes."""
    rollout = ("" if num_envs is None else
               f" (this batch: {num_envs} envs x {num_steps} steps)")
    return (f"baseline={baseline!r} is estimated from {num_episodes} complete episodes in "
            f"this batch (fewer than {MIN_EPISODES}): a ratio fitted on so few other episodes "
            "is noisier than the mean baseline it replaces (measured 1.03-1.28x its variance "
            "at 7-13 episodes, docs/baselines.md). Collect more episodes per batch "
            f"(raise ReinforceConfig.num_envs or num_steps{rollout}), shrink the ratio towards "
            "the mean (baseline_shrinkage='auto', pgtwin train --baseline-shrinkage auto), "
            f"keep a longer memory (baseline_memory, now {memory:g}), or use baseline='mean' "
            "or 'optimal_time'")


def layout_args(layout: EpisodeLayout, dtype: str) -> tuple[np.ndarray, ...]:
    """The computation's arguments, in order: obs, actions, mask, chunk_episode, returns,
    discounted_rewards, E, sum_e T_e, scale (config dtype), horizon (int32)."""
    scalar = lambda x: np.asarray(x, dtype)  # noqa: E731
    return (layout.obs, layout.actions, layout.mask, layout.chunk_episode, layout.returns,
            layout.discounted_rewards, scalar(layout.num_episodes), scalar(layout.num_steps),
            scalar(layout.scale), np.int32(layout.horizon))


class LayoutPath:
    """``UpdatePath`` of an episodic baseline over a twin's TensorFlow computation.

    Args:
      config, spec: the agent's.
      policy: the rollout's ``policy_fn`` (the agent's ``dist_params``).
      memory: the memory the twin holds in its variables (``HeldMemory``).
      names: the weights' names, in the order of the computation's gradients.
      train: ``(*layout_args, rows, horizon) -> (loss, grad_norm, entropy, applied, baseline,
        held, rows after, horizon after)``: one guarded optimizer step that also updates the
        memory when applied. ``rows, horizon`` (int32) are ``memory.held_rows()``, the record
        the grid was laid out for; ``held`` says whether the memory's variables matched it
        (``optimal_time``; always true for the other baselines), and nothing is applied where
        they did not. ``rows after, horizon after``: what the variables hold after the step.
      estimate: ``(*layout_args) -> (loss, [grads])``: the loss and its gradient, nothing
        changed.
    """

    def __init__(self, config, spec, policy: PolicyFn, memory: HeldMemory,
                 names: Sequence[str], train: Callable[..., Sequence[Any]],
                 estimate: Callable[..., tuple[Any, Sequence[Any]]]):
        self.config, self.spec, self.memory = config, spec, memory
        self._policy, self._names = policy, list(names)
        self._train, self._estimate = train, estimate
        self._warned = False
        self.checkpointed: dict[str, Any] = {}
        """What the agent's checkpoint saves besides the policy and optimizer (the eager
        twin's memory module); the graph twin's ``Saver`` takes every variable anyway."""

    def rollout_policy(self) -> PolicyFn:
        return self._policy

    def layout(self, batch: Batch) -> EpisodeLayout:
        """The batch's grid (``NoCompleteEpisodeError`` without a complete episode); warns
        once below ``MIN_EPISODES`` episodes. ``optimal_time``'s memory is widened to the
        grid's width here (``HeldMemory.widen``: the same values, one compile per width)."""
        stored, horizon = self.memory.held_rows()
        layout = episode_layout(batch, self.config, self.spec,
                                one_chunk_per_episode=self.config.baseline == "optimal_time",
                                min_horizon=horizon)
        if stored < layout.mask.shape[1]:  # optimal_time: one compile per grid width
            self.memory.widen(layout.mask.shape[1])
        if (layout.num_episodes < MIN_EPISODES and not self._warned
                and warns_below_min_episodes(self.config)):
            self._warned = True
            c = self.config
            warnings.warn(few_episodes_message(c.baseline, layout.num_episodes,
                                               c.baseline_memory, batch.num_envs,
                                               batch.num_steps),
                          FewEpisodesWarning, stacklevel=3)
        return layout

    def _args(self, batch: Batch) -> tuple[np.ndarray, ...]:
        """The estimate's arguments, laid out for the memory's rows as read now: the estimate
        has no check of the record (:class:`HeldMemory`) and is no hot path."""
        self.memory.forget_rows()
        return layout_args(self.layout(batch), self.config.dtype)

    def loss_value(self, batch: Batch) -> float:
        """The loss at the baseline: for the per-element ones, the surrogate at ``<R>``."""
        loss, _ = self._estimate(*self._args(batch))
        return float(np.asarray(loss))

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """The loss gradient the update would apply (unclipped), by weight name."""
        _, grads = self._estimate(*self._args(batch))
        return {n: np.array(g) for n, g in zip(self._names, grads)}

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step; metrics add ``baseline`` and ``episodes``. A batch without a
        complete episode skips it (weights, optimizer and memory untouched)."""
        for _ in range(2):  # a second time after a stale record of the memory's rows
            try:
                layout = self.layout(batch)
            except NoCompleteEpisodeError:
                return skipped_update_metrics()
            rows, horizon = self.memory.held_rows()
            loss, norm, ent, applied, b, held, rows_after, horizon_after = self._train(
                *layout_args(layout, self.config.dtype), np.int32(rows), np.int32(horizon))
            if bool(held):
                self.memory.remember_rows(int(rows_after), int(horizon_after))
                return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                        "applied": bool(applied), "baseline": float(b),
                        "episodes": layout.num_episodes}
            self.memory.forget_rows()  # written behind the path's back: read them again
        raise RuntimeError(
            f"baseline={self.config.baseline!r}: something else writes the memory's variables "
            "(baseline_memory/num or /horizon) while this agent updates, another thread?: "
            "they changed under two updates in a row, and nothing was applied. Update the "
            "agent from one thread at a time")
