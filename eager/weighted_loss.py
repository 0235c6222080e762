"""The REINFORCE loss of an eager agent run on given inputs: the ``WeightedLoss`` of the TF2 twin.

Three ``tf.function``s over the agent's variables and optimizer, each traced once: the loss
with its gradients (one ``GradientTape``), the guarded train step (XLA-compiled if
``config.jit_compile``: XLA fuses Keras Adam's per-variable small ops, which TF1 runs as one
fused kernel per variable; docs/benchmarks.md) and the guarded apply of given gradients. The
train step is called through its single trace directly (``eager/policy_call.py``). Mirrors
``legacy_graph/weighted_loss.py``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from pgtwin_core.advantages import TrainInputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec

from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.loss import reinforce_loss

from eager.gradient_step import checked_gradients, guarded_apply
from eager.policy_call import direct_callable
from eager.tracing import batch_signatures, traced


def batch_args(inputs: TrainInputs) -> tuple[np.ndarray, ...]:
    """``(obs, actions, advantages, weights)``: the loss functions' arguments."""
    return inputs.obs, inputs.actions, inputs.advantages, inputs.weights


class WeightedLoss:
    """``pgtwin_core.update_path.WeightedLoss`` of an eager agent (one replica), and the
    traceable loss the distributed agent runs inside each replica.

    Args:
      spec, config: the agent's (``config.dtype`` the dtype of inputs and weights).
      variables: the policy variables by canonical name.
      optimizer: the agent's built Keras optimizer.
    """

    def __init__(self, spec: PolicySpec, config: ReinforceConfig,
                 variables: dict[str, tf.Variable], optimizer: tf.keras.optimizers.Optimizer):
        self.spec, self.config, self.variables, self.optimizer = spec, config, variables, optimizer
        s = batch_signatures(spec, config.dtype)
        batch_sig = [s["obs"], s["actions"], s["vector"], s["vector"]]
        grad_sig = [[tf.TensorSpec(v.shape, v.dtype) for v in variables.values()]]
        self.loss_fn = traced(self.loss_and_grads, input_signature=batch_sig)
        self.train_fn = traced(self.train_step, input_signature=batch_sig,
                               jit_compile=config.jit_compile)
        self.apply_fn = traced(self.apply_step, input_signature=grad_sig)
        self._train_call = None  # direct_callable(self.train_fn), traced on the first update

    # ------------------------------------------------------------ traced bodies
    def loss_and_grads(self, obs, actions, advantages, weights):
        """``(loss, grads list, sum_i w_i H_i)`` of one batch ``[B, ...]`` (traceable)."""
        with tf.GradientTape() as tape:
            params = forward_pass.dist_params(self.spec, self.variables, obs)
            entropies = distributions.entropy(self.spec, params)
            loss = reinforce_loss(distributions.log_prob(self.spec, params, actions),
                                  advantages, weights, entropies, self.config.entropy_coef)
        grads = checked_gradients(tape, loss, self.variables)
        return loss, grads, tf.reduce_sum(weights * entropies)

    def train_step(self, obs, actions, advantages, weights):
        """``(loss, grad_norm, entropy, applied)`` of one guarded step (traceable)."""
        loss, grads, entropy = self.loss_and_grads(obs, actions, advantages, weights)
        applied = self.guarded_apply(grads, loss)
        return loss, tf.linalg.global_norm(grads), entropy, applied

    def guarded_apply(self, grads: list[tf.Tensor], loss: tf.Tensor) -> tf.Tensor:
        """``eager.gradient_step.guarded_apply`` with the agent's optimizer and clipping."""
        return guarded_apply(self.optimizer, self.variables, grads, loss,
                             self.config.max_grad_norm)

    def apply_step(self, grads: list[tf.Tensor]) -> tf.Tensor:
        """The guarded apply of given gradients (their finiteness guards it; traceable)."""
        return self.guarded_apply(grads, tf.constant(0.0, self.config.dtype))

    def trace_counts(self) -> dict[str, int]:
        """How often each ``tf.function`` has been traced (1 after warm-up, never more)."""
        fns = {"loss": self.loss_fn, "train": self.train_fn, "apply": self.apply_fn}
        return {k: f.experimental_get_tracing_count() for k, f in fns.items()}

    # ------------------------------------------------------------ WeightedLoss
    def loss(self, replicas: Sequence[TrainInputs]) -> float:
        (inputs,) = replicas
        loss, _, _ = self.loss_fn(*batch_args(inputs))
        return float(loss)

    def loss_and_entropy(self, replicas: Sequence[TrainInputs]) -> tuple[float, float]:
        (inputs,) = replicas
        loss, _, entropy = self.loss_fn(*batch_args(inputs))
        return float(loss), float(entropy)

    def gradients(self, replicas: Sequence[TrainInputs]) -> dict[str, np.ndarray]:
        (inputs,) = replicas
        _, grads, _ = self.loss_fn(*batch_args(inputs))
        return {name: g.numpy() for name, g in zip(self.variables, grads)}

    def train(self, replicas: Sequence[TrainInputs]) -> tuple[float, float, float, bool]:
        (inputs,) = replicas
        if self._train_call is None:
            self._train_call = direct_callable(self.train_fn)
        loss, norm, ent, applied = self._train_call(*batch_args(inputs))
        return float(loss), float(norm), float(ent), bool(applied)

    def apply(self, grads: dict[str, np.ndarray]) -> bool:
        values = [tf.constant(np.asarray(grads[n], self.config.dtype)) for n in self.variables]
        return bool(self.apply_fn(values))
