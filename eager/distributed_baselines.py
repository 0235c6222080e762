"""The episodic optimal baselines under ``tf.distribute``, from all-reduced sums.

``optimal_scalar_episodic``, ``optimal_per_param`` and ``optimal_time`` (formulas and
decisions in ``pgtwin_core/baselines.py``) average over the complete episodes of the GLOBAL
batch. Each replica cuts its own batch into episodes (an env's episodes never cross
replicas) and takes per-sample gradients of them on its copy of the weights; every sum over
episodes is then all-reduced (``strategy.reduce(SUM)``, a collective across workers too)
before anything is divided::

    scale   from sum 1, sum R, then sum (R - mean)^2 over valid steps   (normalize_returns)
    E, sum_e T_e, H = max_e T_e                                          episodes, steps, horizon
    scalar_episodic  S_nR = sum_e n_e R_e, S_n = sum_e n_e, S_R = sum_e R_e,  n_e = ||g_e||^2
    per_param        S_ggR = sum_e g_e^2 R_e [P], S_gg [P], S_R
    time             sum_e psi^2 a r [H, P], sum_e psi^2 [H, P], sum_e a r [H, 1]

Episode e's leave-one-out baseline is then (memory + global sum - e's own term) /
(memory + global sum - e's own term) (``pgtwin_core.baselines.loo_from_sums``), its mean
fallback (M_R + S_R - R_e) / (M_E + E - 1), where M are the earlier batches' decayed sums
(``pgtwin_core/baseline_memory.py``, in raw return units): after an applied update the memory
takes in the all-reduced sums, so every replica and worker holds the same memory. The ascent
``sum_e g_e (R_e - b^(-e))`` is summed per replica and all-reduced, then divided by the
global ``sum_e T_e`` and the scale; the loss (and the entropy bonus's gradient) by the
agent's distributed loss function. The result is the single-device update on the joined
batch up to the order of float summation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core import baselines as shared
from pgtwin_core.baseline_memory import BaselineMemory, EpisodeSums
from pgtwin_core.errors import NoCompleteEpisodeError
from pgtwin_core.returns import discounted_returns
from pgtwin_core.rollout import Batch

from eager import collectives


@dataclass
class _Replica:
    """One local replica's complete episodes (rows episode after episode)."""

    obs: np.ndarray
    actions: np.ndarray
    used: np.ndarray          # int64 [M_r]: flat indices of the complete episodes' steps
    episode: np.ndarray       # int64 [M_r]: the step's episode (0..E_r - 1)
    lengths: np.ndarray       # int64 [E_r]
    returns: np.ndarray       # float64 [E_r], R_e (raw: the memory's units)
    rewards: np.ndarray       # float64 [M_r], a_l r_l (raw)
    grads: np.ndarray         # float64 [M_r, P]


class DistributedEpisodic:
    """``gradients``, ``update``, ``loss_value`` of a ``DistributedReinforceAgent`` whose
    baseline is one of ``pgtwin_core.baselines.EPISODIC``."""

    def __init__(self, agent):
        self._agent = agent
        self.memory = BaselineMemory(agent.config.baseline_memory)
        """Earlier batches' sums, global (from all-reduced sums): read by every estimate,
        added to only by an applied update."""

    # ------------------------------------------------------------ reductions
    def _allreduce(self, local: list[list[np.ndarray]]) -> list[np.ndarray]:
        """Sum over all replicas (``eager.collectives.sum_over_replicas``)."""
        return collectives.sum_over_replicas(self._agent.strategy, self._agent.replica_ids, local)

    def _by_replica(self, values: list[float]) -> np.ndarray:
        """``[num_replicas]``: each replica's value in its own slot (``eager.collectives``)."""
        return collectives.by_replica(self._agent.strategy, self._agent.replica_ids, values)

    # ------------------------------------------------------------ estimate
    def _estimate(self, batches: Sequence[Batch]) -> dict[str, Any]:
        a = self._agent
        config, spec = a.config, a.spec
        segs = [shared.segments(b, config.gamma) for b in batches]
        reward_to_go = [
            discounted_returns(b.rewards, b.terminated, b.truncated, config.gamma)[b.valid]
            for b in batches]
        count, total = self._allreduce([[np.float64(r.size), np.sum(r)] for r in reward_to_go])
        scale = 1.0
        if config.normalize_returns:  # shared.returns_scale over the global batch
            (squares,) = self._allreduce([[np.sum((r - total / count) ** 2)]
                                          for r in reward_to_go])
            std = float(np.sqrt(squares / count))
            scale = std if std > 0 else 1.0
        names = list(a.variables)
        shapes = [tuple(v.shape) for v in a.variables.values()]
        width = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
        method = shared.per_sample_method(spec.torso)
        replicas = []
        for batch, s in zip(batches, segs):
            obs, actions, _, _ = a.replica_arrays(batch)
            used = s.episode_order()
            lengths = s.lengths[s.complete]
            if used.size:
                per_sample = a.per_sample_gradients(obs[used], actions[used], method)
                grads = shared.flatten({n: per_sample[n] for n in names})
            else:
                grads = np.zeros((0, width))
            replicas.append(_Replica(
                obs=obs, actions=actions, used=used, episode=s.episode_ids()[used],
                lengths=lengths, returns=s.returns[s.complete],
                rewards=s.discounted_rewards[used], grads=grads))
        horizons = self._by_replica([int(r.lengths.max(initial=0)) for r in replicas])
        num_episodes, num_steps = (int(x) for x in self._allreduce(
            [[np.float64(r.lengths.size), np.float64(r.lengths.sum())] for r in replicas]))
        if num_episodes == 0:
            raise NoCompleteEpisodeError(
                f"baseline={config.baseline!r} needs a complete episode in the global batch, "
                f"and none of the {a.num_replicas} replicas' batches (T={batches[0].num_steps}) "
                "holds one: raise ReinforceConfig.num_steps above the episode length")
        horizon = max(int(horizons.max()), self.memory.horizon)
        prior = self.memory.sums
        ascent = None
        (sum_r,) = self._allreduce([[np.sum(r.returns)] for r in replicas])
        centre = sum_r / num_episodes / scale  # the reported loss's <R>
        if config.baseline == "optimal_time":
            psis = [shared.time_psi(r.grads, r.lengths) for r in replicas]
            sums = EpisodeSums(*self._allreduce(
                [list(shared.time_sums(p, r.lengths, r.rewards, horizon))
                 for p, r in zip(psis, replicas)]), count=float(num_episodes))
            total = sums if prior is None else sums.plus(prior)
            (ascent,) = self._allreduce([[shared.time_ascent_from_sums(
                p, r.lengths, r.rewards, (total.num, total.den, total.sum_r), total.count)]
                for p, r in zip(psis, replicas)])
        else:
            scores = [shared.episode_scores(r.grads, r.lengths) if r.lengths.size
                      else np.zeros((0, width)) for r in replicas]
            if config.baseline == "optimal_scalar_episodic":
                own = [(np.sum(g ** 2, axis=1), r.returns) for g, r in zip(scores, replicas)]
            else:  # optimal_per_param
                own = [(g * g, r.returns[:, None]) for g, r in zip(scores, replicas)]
            s_nr, s_n = self._allreduce([[np.sum(n * r, axis=0), np.sum(n, axis=0)]
                                         for n, r in own])
            sums = EpisodeSums(num=s_nr, den=s_n, sum_r=sum_r, count=float(num_episodes))
            total = sums if prior is None else sums.plus(prior)
            b_loo = [shared.loo_from_sums(total.num, total.den, n * r, n, total.sum_r, r,
                                          total.count) for n, r in own]
            if config.baseline == "optimal_per_param":
                (ascent,) = self._allreduce([[np.sum(g * (r - bl), axis=0)]
                                             for g, (_, r), bl in zip(scores, own, b_loo)])
        b = shared._ratio_or(total.num, total.den,  # noqa: SLF001 (plug-in, for logging)
                             total.sum_r / total.count)
        advantages, weights = [], []
        for k, r in enumerate(replicas):
            adv, w = np.zeros(r.obs.shape[0]), np.zeros(r.obs.shape[0])
            if ascent is None:
                adv[r.used] = (r.returns[r.episode] - b_loo[k][r.episode]) / scale
            else:
                adv[r.used] = r.returns[r.episode] / scale - centre
            w[r.used] = 1.0 / num_steps
            advantages.append(adv.astype(spec.np_dtype))
            weights.append(w.astype(spec.np_dtype))
        if ascent is not None:
            ascent = ascent / (num_steps * scale)
            start, split = 0, {}
            for n, shape in zip(names, shapes):
                size = int(np.prod(shape, dtype=np.int64))
                split[n] = ascent[start:start + size].reshape(shape)
                start += size
            ascent = split
        return {"replicas": replicas, "advantages": advantages, "weights": weights,
                "ascent": ascent, "baseline": float(np.mean(b)) / scale,
                "episodes": num_episodes, "num_valid": int(count), "sums": sums}

    def _loss(self, est, advantages=None):
        """All-reduced ``(loss, grads list, entropy)`` of the weighted REINFORCE loss."""
        a = self._agent
        advantages = est["advantages"] if advantages is None else advantages
        arrays = {rid: (r.obs, r.actions, adv, w) for rid, r, adv, w in
                  zip(a.replica_ids, est["replicas"], advantages, est["weights"])}
        values = a.strategy.experimental_distribute_values_from_function(
            lambda ctx: tuple(tf.constant(x) for x in arrays[ctx.replica_id_in_sync_group]))
        loss, grads, entropy = a._replica_loss_fn(*values)  # noqa: SLF001 (same twin)
        first = lambda v: a.strategy.experimental_local_results(v)[0].numpy()  # noqa: E731
        return first(loss), [first(g) for g in grads], first(entropy)

    def _gradients(self, est) -> tuple[dict[str, np.ndarray], float, float]:
        """The loss gradient by name, the loss and the entropy term."""
        a = self._agent
        loss, grads, entropy = self._loss(est)
        if est["ascent"] is None:
            return dict(zip(a.variables, grads)), loss, entropy
        out = {n: -est["ascent"][n] for n in a.variables}
        if a.config.entropy_coef > 0:
            _, bonus, _ = self._loss(est, [np.zeros_like(x) for x in est["advantages"]])
            out = {n: out[n] + g for n, g in zip(a.variables, bonus)}
        return {n: g.astype(a.spec.np_dtype) for n, g in out.items()}, loss, entropy

    # ---------------------------------------------------------------- public
    def loss_value(self, batches: Sequence[Batch]) -> float:
        return float(self._loss(self._estimate(batches))[0])

    def gradients(self, batches: Sequence[Batch]) -> dict[str, np.ndarray]:
        return self._gradients(self._estimate(batches))[0]

    def update(self, batches: Sequence[Batch]) -> dict[str, Any]:
        try:
            est = self._estimate(batches)
        except NoCompleteEpisodeError:  # no unbiased estimate: skip, and say so
            return {**shared.skipped_update_metrics(), "num_valid": 0}
        grads, loss, entropy = self._gradients(est)
        norm = float(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values())))
        applied = bool(np.isfinite(loss)) and self._agent.apply_gradients(grads)
        if applied:  # the global sums: every replica's memory stays the same
            self.memory.add(est["sums"])
        return {"loss": float(loss), "grad_norm": norm, "entropy": float(entropy),
                "applied": applied, "num_valid": est["num_valid"], "baseline": est["baseline"],
                "episodes": est["episodes"]}
