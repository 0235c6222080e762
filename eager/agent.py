"""REINFORCE, the TF2 way: ``tf.Variable``s, ``GradientTape``, Keras optimizers, ``tf.function``.

Mirrors ``legacy_graph/agent.py`` method for method. Hot paths are ``tf.function``s with
input signatures (a dynamic batch dimension), so they trace once and never again; the
trace counts are exposed for tests (``trace_counts``). The rollout's policy call and the
update call their single trace directly, without ``tf.function``'s per-call Python
(``eager/policy_call.py``).
"""
from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.baselines import EPISODIC
from pgtwin_core.checkpoint_layout import agent_layout, check_layout
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import DisconnectedGradientError
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec, check_weights, init_weights

from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.loss import reinforce_loss

from eager import network
from eager.checkpoint_layout import saved_layout
from eager.optimizers import make_optimizer
from eager.policy_call import direct_callable, policy_callable


def checked_gradients(tape: tf.GradientTape, loss: tf.Tensor,
                      variables: dict[str, tf.Variable]) -> list[tf.Tensor]:
    """``tape.gradient(loss, variables)``, raising ``DisconnectedGradientError`` on any None."""
    grads = tape.gradient(loss, list(variables.values()))
    missing = [name for name, g in zip(variables, grads) if g is None]
    if missing:
        raise DisconnectedGradientError(missing)
    return grads


class ReinforceAgent:
    """A REINFORCE learner in TF2 eager with ``tf.function`` hot paths.

    Args:
      spec: the policy; computed in ``config.dtype`` (the config decides the dtype).
      config: hyperparameters.
      weights: initial numpy weights by canonical name; ``init_weights(spec, seed)`` if None.
      seed: seeds the initial weights (when ``weights`` is None).
    """

    impl = "eager"

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0):
        self.spec = spec.with_dtype(config.dtype)
        self.config = config
        weights = init_weights(self.spec, seed) if weights is None else weights
        self.policy = network.PolicyVariables(self.spec, check_weights(self.spec, weights))
        self.variables = self.policy.variables_by_name
        self.optimizer = make_optimizer(config)
        self.optimizer.build(list(self.variables.values()))
        self.checkpoint = tf.train.Checkpoint(policy=self.policy, optimizer=self.optimizer)
        self._build_functions()
        self._cached_update = None  # eager.cached.CachedUpdate, built on first use
        self._per_sample = None  # eager.per_sample.PerSampleGradients, built on first use
        self._baseline_update = None  # eager.baselines.BaselineUpdate, built on first use

    # ------------------------------------------------------------ functions
    def _signatures(self) -> dict[str, tf.TensorSpec]:
        spec, dtype = self.spec, self.spec.dtype
        act = (tf.TensorSpec([None], tf.int64) if spec.is_discrete
               else tf.TensorSpec([None, spec.action_size], dtype))
        return {"obs": tf.TensorSpec([None, *spec.obs_shape], dtype), "actions": act,
                "vector": tf.TensorSpec([None], dtype)}

    def _build_functions(self) -> None:
        s = self._signatures()
        batch_sig = [s["obs"], s["actions"], s["vector"], s["vector"]]
        grad_sig = [[tf.TensorSpec(v.shape, v.dtype) for v in self.variables.values()]]
        # No AutoGraph: these bodies branch on tensors only through explicit tf.cond, and
        # converting them (and the Keras optimizer code they call) is about a second of
        # start-up, most of a CartPole run's set-up time.
        # Each agent's functions trace once. TF's retracing detector counts traces by the
        # method's code, across instances, so every agent after the fifth (the parity
        # ladder builds dozens) was reported as "retracing"; a partial per agent is its
        # own key, so only a real retrace of one agent's function would be.
        def function(method, **kwargs):
            return tf.function(functools.partial(method), autograph=False, **kwargs)

        self._dist_params_fn = function(self._params, input_signature=[s["obs"]])
        self._log_prob_fn = function(self._log_prob, input_signature=[s["obs"], s["actions"]])
        self._loss_fn = function(self._loss_and_grads, input_signature=batch_sig)
        # XLA fuses Keras Adam's per-variable small ops, which TF1 runs as one fused kernel
        # per variable; without it the eager update trails the Session one (docs/benchmarks.md).
        self._train_fn = function(self._train_step, input_signature=batch_sig,
                                  jit_compile=self.config.jit_compile)
        self._apply_fn = function(self._guarded_apply_zero_loss, input_signature=grad_sig)
        # The numpy path of the same single trace, for the once-per-env-step rollout calls.
        self._dist_params_call = policy_callable(self._dist_params_fn)
        self._train_call = None  # direct_callable(self._train_fn), traced on the first update

    def trace_counts(self) -> dict[str, int]:
        """How often each ``tf.function`` has been traced (1 after warm-up, never more)."""
        fns = {"dist_params": self._dist_params_fn, "log_prob": self._log_prob_fn,
               "loss": self._loss_fn, "train": self._train_fn, "apply": self._apply_fn}
        return {k: f.experimental_get_tracing_count() for k, f in fns.items()}

    def _params(self, obs: tf.Tensor) -> tf.Tensor:
        return forward_pass.dist_params(self.spec, self.variables, obs)

    def _log_prob(self, obs: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        return distributions.log_prob(self.spec, self._params(obs), actions)

    def _loss_and_grads(self, obs, actions, advantages, weights):
        with tf.GradientTape() as tape:
            params = self._params(obs)
            entropies = distributions.entropy(self.spec, params)
            loss = reinforce_loss(distributions.log_prob(self.spec, params, actions),
                                  advantages, weights, entropies, self.config.entropy_coef)
        grads = checked_gradients(tape, loss, self.variables)
        return loss, grads, tf.reduce_sum(weights * entropies)

    def _train_step(self, obs, actions, advantages, weights):
        loss, grads, entropy = self._loss_and_grads(obs, actions, advantages, weights)
        applied = self._guarded_apply(grads, loss)
        return loss, tf.linalg.global_norm(grads), entropy, applied

    def _guarded_apply(self, grads: list[tf.Tensor], loss: tf.Tensor) -> tf.Tensor:
        """Apply ``grads`` (clipped if configured) only when loss and grads are finite."""
        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in grads]
                                        + [tf.math.is_finite(loss)]))
        if self.config.max_grad_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, self.config.max_grad_norm)
        pairs = list(zip(grads, self.variables.values()))
        tf.cond(finite, lambda: self._apply_pairs(pairs), lambda: tf.constant(False))
        return finite

    def _apply_pairs(self, pairs) -> tf.Tensor:
        self.optimizer.apply_gradients(pairs)
        return tf.constant(True)

    def _guarded_apply_zero_loss(self, grads: list[tf.Tensor]) -> tf.Tensor:
        return self._guarded_apply(grads, tf.constant(0.0, self.spec.dtype))

    # --------------------------------------------------------------- policy
    def dist_params(self, obs: np.ndarray) -> np.ndarray:
        """Distribution parameters ``[B, num_params]`` for observations ``[B, *obs_shape]``."""
        return self._dist_params_call(policy_inputs.as_obs(self.spec, obs))

    def rollout_policy(self):
        """The ``policy_fn`` for ``pgtwin_core.rollout.collect`` before the next update.

        With ``update_path='recompute'`` this is :meth:`dist_params`; with ``'cached'`` it is a
        fresh ``eager.cached.RolloutRecording`` that the next update differentiates.
        """
        if self.config.update_path == "cached":
            return self._cached().recorder()
        return self.dist_params

    def _cached(self):
        """The cached update path (``eager/cached.py``), built on first use."""
        if self._cached_update is None:
            from eager.cached import CachedUpdate  # it imports this module
            self._cached_update = CachedUpdate(self)
        return self._cached_update

    def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log pi(a|s) ``[B]`` in the spec's dtype."""
        obs = policy_inputs.as_obs(self.spec, obs)
        actions = policy_inputs.as_actions(self.spec, actions, obs.shape[0])
        return self._log_prob_fn(obs, actions).numpy()

    def per_sample_gradients(self, obs: np.ndarray, actions: np.ndarray,
                             method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient of each ``log pi(a_i|s_i)``, not summed.

        ``method``: ``vectorized`` (pfor), ``analytic`` (MLP: one backward pass) or ``loop``
        (one eager tape per sample; the slow reference). See ``eager/per_sample.py``. The arrays
        are read-only views of TensorFlow's buffers (no copy).
        """
        return self._per_sample_ops().gradients(obs, actions, method)

    def per_sample_sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        return self._per_sample_ops().sq_norms(obs, actions)

    def _per_sample_ops(self):
        if self._per_sample is None:
            from eager.per_sample import PerSampleGradients
            self._per_sample = PerSampleGradients(self)
        return self._per_sample

    def _baselines(self):
        """The optimal-baseline update (``eager/baselines.py``), built on first use."""
        if self._baseline_update is None:
            from eager.baselines import BaselineUpdate
            self._baseline_update = BaselineUpdate(self)
        return self._baseline_update

    @property
    def baseline_memory(self):
        """The episodic baselines' earlier-batch sums (``pgtwin_core.baseline_memory.BaselineMemory``;
        None for the other baselines): part of the training state, like the optimizer's."""
        return self._baselines().memory if self.config.baseline in EPISODIC else None

    # --------------------------------------------------------------- update
    def inputs(self, batch: Batch) -> TrainInputs:
        """The flat arrays an update on ``batch`` is fed (validated by ``training_inputs``)."""
        return training_inputs(batch, self.config, self.spec)

    @staticmethod
    def _args(inputs: TrainInputs) -> tuple[np.ndarray, ...]:
        return inputs.obs, inputs.actions, inputs.advantages, inputs.weights

    def loss_value(self, batch: Batch) -> float:
        """The REINFORCE loss on ``batch`` (no update)."""
        if self.config.needs_per_sample_gradients:
            return self._baselines().loss_value(batch)
        loss, _, _ = self._loss_fn(*self._args(self.inputs(batch)))
        return float(loss)

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """Gradient of the loss on ``batch`` by variable name (unclipped, not applied)."""
        if self.config.needs_per_sample_gradients:
            return self._baselines().gradients(batch)
        if self.config.update_path == "cached":
            return self._cached().gradients(batch)
        _, grads, _ = self._loss_fn(*self._args(self.inputs(batch)))
        return {name: g.numpy() for name, g in zip(self.variables, grads)}

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step on ``batch``; returns metrics.

        A non-finite loss or gradient skips the step (weights and optimizer state unchanged)
        and is reported as ``applied = False``.
        """
        if self.config.needs_per_sample_gradients:
            return self._baselines().update(batch)
        if self.config.update_path == "cached":
            return self._cached().update(batch)
        if self._train_call is None:
            self._train_call = direct_callable(self._train_fn)
        loss, norm, ent, applied = self._train_call(*self._args(self.inputs(batch)))
        return {"loss": float(loss), "grad_norm": float(norm), "entropy": float(ent),
                "applied": bool(applied)}

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply given gradients with the agent's optimizer; False (skipped) if non-finite."""
        values = [tf.constant(np.asarray(grads[n], self.spec.np_dtype)) for n in self.variables]
        return bool(self._apply_fn(values))

    # -------------------------------------------------------------- weights
    def get_weights(self) -> dict[str, np.ndarray]:
        """Current weights by canonical name."""
        return {name: v.numpy() for name, v in self.variables.items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights (validated against the spec: missing, extra or misshapen raise)."""
        weights = check_weights(self.spec, weights)
        for name, v in self.variables.items():
            v.assign(weights[name])

    def variable_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """``{name: (shape, dtype)}`` of the policy variables, as TensorFlow names them."""
        return {v.name.split(":")[0]: (tuple(v.shape.as_list()), v.dtype.name)
                for v in self.variables.values()}

    def save(self, path: str) -> str:
        """Write a ``tf.train.Checkpoint`` (weights and optimizer state) at prefix ``path``."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return self.checkpoint.write(path)

    def restore(self, path: str) -> None:
        """Restore a checkpoint written by :meth:`save` (every value must match).

        Raises ``IncompatibleCheckpointError`` (nothing restored) when the checkpoint's
        variables, shapes, dtypes or optimizer differ from this agent's, with the legacy
        twin's message.
        """
        check_layout(path, saved_layout(path), agent_layout(self.spec, self.config))
        self.checkpoint.read(path).assert_consumed()

    def close(self) -> None:
        """Nothing to release (mirrors the legacy twin's ``close``)."""
