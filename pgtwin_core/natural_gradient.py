"""The natural policy gradient step (no TensorFlow here; each twin supplies its per-sample scores).

Natural policy gradient (Kakade 2001), with the step TRPO takes before its line search
(Schulman et al. 2015, appendix C) and NPG's normalised step (Rajeswaran et al. 2017)::

    s_i  = grad log pi(a_i|s_i)                    per-sample scores, [B, P] (the twin's)
    F    = sum_i w_i s_i s_i^T                     the Fisher of the batch's states; with
                                                   a_i drawn from pi it is an unbiased
                                                   sample of E[s s^T] (not the "empirical
                                                   Fisher" of supervised data)
    x    ~ (F + lambda I)^-1 g                     conjugate gradient, F never formed:
                                                   F v = S^T (w * (S v))
    d    = sqrt(2 delta / x^T (F + lambda I) x) x  the KL of the step to second order,
                                                   1/2 d^T F d, is delta (damped)
    theta <- theta - lr 2^-k d                     the twin's SGD step: lr = 1 takes it
                                                   whole, a schedule shrinks it; k the
                                                   line search's (below)

g is the gradient of the REINFORCE loss (``pgtwin_core.update_path.WeightedLoss``), so its
entropy term is preconditioned with the rest. The step's size no longer depends on the
advantages' scale or on the parametrisation: a Gaussian head's log-std and the hidden
layers move by what they change in the policy, which is what plain and Adam steps on
Pendulum-v1 lacked (docs/continuous.md measures both). Arrays are float64 here whatever
the agent's dtype; the step goes back in ``config.dtype``.

The line search (TRPO's, as OpenAI baselines' ``trpo_mpi`` writes it): the quadratic model
of the KL holds only near the old policy, and one step past it can undo a run (measured on
Pendulum-v1, docs/continuous.md). So the step is taken, the batch's states are passed
through the new policy, and the step is halved (k = 1, 2, ... ``natural_backtracks``) while
the measured mean KL(pi_old || pi_new) exceeds 1.5 delta or the surrogate loss
``-sum_i w_i A_i pi_new/pi_old - c sum_i w_i H_new`` is not below its value at the old
policy; if no fraction passes, the old weights stay. ``natural_backtracks = 0`` takes the
step as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.sampling import entropy, kl_divergence, log_prob
from pgtwin_core.specs import PolicySpec
from pgtwin_core.update_path import Grads, WeightedLoss

KL_SLACK = 1.5
"""The line search accepts a measured KL up to ``KL_SLACK * natural_kl`` (baselines' 1.5)."""


class Policy(Protocol):
    """What the natural step needs of a twin's agent (its public methods)."""

    spec: PolicySpec

    def per_sample_gradients(self, obs: np.ndarray, actions: np.ndarray,
                             method: str) -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the score of each sample."""

    def dist_params(self, obs: np.ndarray) -> np.ndarray:
        """``[B, num_params]`` at the current weights."""

    def get_weights(self) -> dict[str, np.ndarray]: ...

    def set_weights(self, weights: dict[str, np.ndarray]) -> None: ...


def conjugate_gradient(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray,
                       iters: int, tol: float = 1e-10) -> np.ndarray:
    """x ~ A^-1 b for a symmetric positive definite A given as ``matvec``, float64 ``[P]``.

    Hestenes & Stiefel's iteration from x = 0, at most ``iters`` steps, stopping early when
    the residual's norm falls to ``tol`` times ``b``'s (exact for a P x P matrix after P
    steps in exact arithmetic). ``b = 0`` gives 0.
    """
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = float(r @ r)
    stop = (tol * tol) * rr
    for _ in range(iters):
        if rr <= stop or rr == 0.0:
            break
        ap = matvec(p)
        alpha = rr / float(p @ ap)
        x += alpha * p
        r -= alpha * ap
        rr_next = float(r @ r)
        p = r + (rr_next / rr) * p
        rr = rr_next
    return x


@dataclass(frozen=True)
class NaturalStep:
    """One natural step and what it cost."""

    step: np.ndarray
    """float64 ``[P]``: d, the step to subtract (times the learning rate); NaN when the
    scores or the gradient were not finite (the twin's guarded apply then skips it)."""
    residual: float
    """``||(F + lambda I) x - g|| / ||g||``: how far conjugate gradient got (0 for g = 0)."""


def natural_step(scores: np.ndarray, weights: np.ndarray, grad: np.ndarray, max_kl: float,
                 damping: float, iters: int) -> NaturalStep:
    """The step d of the module doc.

    Args:
      scores: float ``[B, P]``, row i the score s_i of step i, flattened.
      weights: float ``[B]``, w_i >= 0 (``TrainInputs.weights``: valid / num_valid).
      grad: float ``[P]``, the loss gradient g, flattened in the scores' order.
      max_kl: delta > 0, the step's KL to second order.
      damping: lambda > 0, added to F's diagonal (keeps CG defined where F is singular:
        always when P > B).
      iters: conjugate-gradient steps, >= 1.
    """
    s = np.asarray(scores, np.float64)
    w = np.asarray(weights, np.float64)
    g = np.asarray(grad, np.float64)
    if s.ndim != 2 or w.shape != (s.shape[0],) or g.shape != (s.shape[1],):
        raise ValueError(f"natural_step: scores {s.shape}, weights {w.shape} and grad "
                         f"{g.shape} must be [B, P], [B] and [P]")
    if not (np.isfinite(g).all() and np.isfinite(s).all()):
        return NaturalStep(np.full(g.shape, np.nan), float("nan"))

    def fisher(v: np.ndarray) -> np.ndarray:
        return s.T @ (w * (s @ v)) + damping * v

    x = conjugate_gradient(fisher, g, iters)
    fx = fisher(x)
    quad = float(x @ fx)
    norm = float(np.linalg.norm(g))
    residual = float(np.linalg.norm(fx - g)) / norm if norm > 0 else 0.0
    if quad <= 0.0:  # g = 0: no direction to go
        return NaturalStep(np.zeros_like(g), residual)
    return NaturalStep(np.sqrt(2.0 * max_kl / quad) * x, residual)


class NaturalGradientLoss:
    """A twin's ``WeightedLoss`` whose ``train`` takes the natural step (module doc).

    ``loss``, ``loss_and_entropy``, ``gradients`` and ``apply`` are the wrapped loss's: the
    gradient a diagnostic reads is the plain one, the natural step is what ``train`` applies
    (through the twin's guarded apply, with its SGD optimizer at the learning rate).

    Args:
      weighted: the twin's ``WeightedLoss``.
      agent: the twin's agent (its scores, forward pass and weights: :class:`Policy`).
      method: which per-sample method (``pgtwin_core.baselines.estimator.per_sample_method``).
      config: the agent's ``ReinforceConfig`` (``natural_kl``, ``natural_damping``,
        ``natural_cg_iters``, ``natural_backtracks``, ``entropy_coef``, ``dtype``).
    """

    def __init__(self, weighted: WeightedLoss, agent: Policy, method: str, config) -> None:
        self.weighted, self.agent, self._method, self.config = weighted, agent, method, config
        self.last: dict[str, float] = {}
        """The last step's metrics: ``natural_cg_residual`` (``NaturalStep.residual``),
        ``natural_fraction`` (what the line search kept of it; 0: none, the weights stayed)
        and ``natural_kl`` (its measured mean KL; not measured without a line search)."""

    def loss(self, replicas: Sequence[TrainInputs]) -> float:
        return self.weighted.loss(replicas)

    def loss_and_entropy(self, replicas: Sequence[TrainInputs]) -> tuple[float, float]:
        return self.weighted.loss_and_entropy(replicas)

    def gradients(self, replicas: Sequence[TrainInputs]) -> Grads:
        return self.weighted.gradients(replicas)

    def apply(self, grads: Grads) -> bool:
        return self.weighted.apply(grads)

    def natural(self, inputs: TrainInputs, grads: Grads) -> tuple[Grads, NaturalStep]:
        """``(d by weight name in config.dtype, the step)`` for one batch and its gradient."""
        scores = self.agent.per_sample_gradients(inputs.obs, inputs.actions, self._method)
        b = inputs.batch_size
        sizes = [int(np.prod(g.shape, dtype=np.int64)) for g in grads.values()]
        flat = np.empty((b, sum(sizes)), np.float64)
        at = 0
        for name, size in zip(grads, sizes):
            flat[:, at:at + size] = np.reshape(scores[name], (b, size))
            at += size
        grad = np.concatenate([np.ravel(g) for g in grads.values()]).astype(np.float64)
        c = self.config
        found = natural_step(flat, inputs.weights, grad, c.natural_kl, c.natural_damping,
                             c.natural_cg_iters)
        step, at = {}, 0
        for (name, g), size in zip(grads.items(), sizes):
            step[name] = found.step[at:at + size].reshape(np.shape(g)).astype(c.dtype)
            at += size
        return step, found

    def train(self, replicas: Sequence[TrainInputs]) -> tuple[float, float, float, bool]:
        """``(loss, ||g||, entropy, applied)``; ``applied`` False (nothing changed) when the
        loss, gradient or scores were not finite."""
        (inputs,) = replicas
        loss, entropy_sum = self.weighted.loss_and_entropy(replicas)
        grads = self.weighted.gradients(replicas)
        norm = float(np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64)))
                                 for g in grads.values())))
        if not np.isfinite(loss):
            return loss, norm, entropy_sum, False
        step, found = self.natural(inputs, grads)
        self.last = {"natural_cg_residual": found.residual}
        if self.config.natural_backtracks == 0 or not np.isfinite(found.step).all():
            applied = bool(self.weighted.apply(step))
            self.last["natural_fraction"] = 1.0 if applied else 0.0
            return loss, norm, entropy_sum, applied
        return loss, norm, entropy_sum, self._line_search(inputs, step)

    def _line_search(self, inputs: TrainInputs, step: Grads) -> bool:
        """Apply the largest ``2^-k`` of ``step`` that passes (module doc); True unless the
        twin's guarded apply refused it."""
        spec, c, w = self.agent.spec, self.config, inputs.weights.astype(np.float64)
        adv = inputs.advantages.astype(np.float64)
        before = self.agent.get_weights()
        old = self.agent.dist_params(inputs.obs)
        old_logp = log_prob(spec, old, inputs.actions)

        def surrogate(params: np.ndarray) -> float:
            ratio = np.exp(log_prob(spec, params, inputs.actions) - old_logp)
            return float(-(w * adv) @ ratio - c.entropy_coef * (w @ entropy(spec, params)))

        start = surrogate(old)
        for k in range(c.natural_backtracks + 1):
            fraction = 0.5 ** k
            if k:
                self.agent.set_weights(before)
            if not self.weighted.apply({n: (fraction * d).astype(d.dtype)
                                        for n, d in step.items()}):
                self.agent.set_weights(before)
                self.last["natural_fraction"] = 0.0
                return False
            new = self.agent.dist_params(inputs.obs)
            kl = float(w @ kl_divergence(spec, old, new))
            if kl <= KL_SLACK * c.natural_kl and surrogate(new) < start:
                self.last.update(natural_fraction=fraction, natural_kl=kl)
                return True
        self.agent.set_weights(before)
        self.last.update(natural_fraction=0.0, natural_kl=0.0)
        return True


class NaturalStepPath:
    """An update path whose ``weighted`` loss is a :class:`NaturalGradientLoss`: the path
    itself (every attribute is the path's), with the natural step's metrics
    (``NaturalGradientLoss.last``: TensorBoard's ``train/natural_*``) added to ``update``'s.
    """

    def __init__(self, path, natural: NaturalGradientLoss) -> None:
        self._path, self._natural = path, natural

    def __getattr__(self, name: str):
        return getattr(self._path, name)

    def update(self, batch) -> dict:
        return {**self._path.update(batch), **self._natural.last}

