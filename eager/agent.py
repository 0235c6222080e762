"""REINFORCE, the TF2 way: ``tf.Variable``s, ``GradientTape``, Keras optimizers, ``tf.function``.

Mirrors ``legacy_graph/agent.py`` method for method. Hot paths are ``tf.function``s with
input signatures (a dynamic batch dimension), so they trace once and never again; the
trace counts are exposed for tests (``trace_counts``). The rollout's policy call and the
update call their single trace directly, without ``tf.function``'s per-call Python
(``eager/policy_call.py``). How a batch becomes an optimizer step is the update path chosen
once when the agent is built (``eager/update_paths.py``).
"""
from __future__ import annotations

import dataclasses

import os
from typing import Any

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs
from pgtwin_core.advantages import TrainInputs, training_inputs
from pgtwin_core.checkpoint_layout import agent_layout, check_layout
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec, check_weights, init_weights

from pgtwin.mode_agnostic import distributions, forward_pass
from pgtwin.mode_agnostic.checkpoint_reader import checkpoint_prefix

from eager import network
from eager.checkpoint_layout import held_memory, saved_layout, saved_memory
from eager.optimizers import make_optimizer
from eager.per_sample import PerSampleGradients
from eager.policy_call import policy_callable, rollout_compiled, snapshot_policy
from eager.tracing import batch_signatures, traced
from eager.update_paths import update_path
from eager.weighted_loss import WeightedLoss


class ReinforceAgent:
    """A REINFORCE learner in TF2 eager with ``tf.function`` hot paths.

    Args:
      spec: the policy network.
      config: hyperparameters, ``config.dtype`` the dtype of every weight and computation.
      weights: initial numpy weights by canonical name; ``init_weights(spec, seed, dtype=...)``
        if None.
      seed: seeds the initial weights (when ``weights`` is None).
    """

    impl = "eager"

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0):
        self.spec = spec
        self.config = config
        self.seed = seed
        """The seed of the initial weights (the value net's too: ``pgtwin_core.value_spec``)."""
        dtype = config.dtype
        weights = init_weights(spec, seed, dtype=dtype) if weights is None else weights
        self.policy = network.PolicyVariables(spec, check_weights(spec, weights, dtype=dtype))
        self.variables = self.policy.variables_by_name
        self.optimizer = make_optimizer(config)
        self.optimizer.build(list(self.variables.values()))
        self._build_functions()
        self._per_sample = None  # eager.per_sample.PerSampleGradients, built on first use
        self.weighted_loss = WeightedLoss(self.spec, config, self.variables, self.optimizer)
        """The REINFORCE loss run on given inputs (``eager/weighted_loss.py``)."""
        self.update_path = self._update_path()
        """How ``loss_value``, ``gradients`` and ``update`` are done (``pgtwin_core.update_path``)."""
        # After the path: a path's own training state (the value net) is checkpointed too.
        self.checkpoint = tf.train.Checkpoint(
            policy=self.policy, optimizer=self.optimizer,
            **getattr(self.update_path, "checkpointed", {}))

    # ------------------------------------------------------------ functions
    def _build_functions(self) -> None:
        s = batch_signatures(self.spec, self.config.dtype)
        self._dist_params_fn = traced(self._params, input_signature=[s["obs"]])
        self._log_prob_fn = traced(self._log_prob, input_signature=[s["obs"], s["actions"]])
        # The numpy path of the same single trace (dist_params).
        self._dist_params_call = policy_callable(self._dist_params_fn)
        # The rollout's once-per-env-step calls: the same forward pass XLA-compiled, where
        # rollout_compiled says so (eager/policy_call.py), on the weights read once per
        # rollout (snapshot_policy); else the plain trace.
        self._rollout_params_fn = self._rollout_snapshot = None
        if rollout_compiled(self.spec, self.config):
            names = list(self.variables)
            weights = [tf.TensorSpec(v.shape, v.dtype) for v in self.variables.values()]

            def params_of(obs: tf.Tensor, *values: tf.Tensor) -> tf.Tensor:
                return forward_pass.dist_params(self.spec, dict(zip(names, values)), obs)
            self._rollout_params_fn = traced(params_of, input_signature=[s["obs"], *weights],
                                             jit_compile=True)
            self._rollout_snapshot = snapshot_policy(self._rollout_params_fn,
                                                     list(self.variables.values()),
                                                     self.spec, self.config.dtype)

    def _update_path(self):
        """The update path of ``self.config`` (``eager/update_paths.py``)."""
        return update_path(self, self.weighted_loss, self._dist_params_fn)

    def trace_counts(self) -> dict[str, int]:
        """How often each ``tf.function`` has been traced (1 after warm-up, never more)."""
        fns = {"dist_params": self._dist_params_fn, "log_prob": self._log_prob_fn}
        if self._rollout_params_fn is not None:
            fns["rollout_params"] = self._rollout_params_fn
        counts = {k: f.experimental_get_tracing_count() for k, f in fns.items()}
        return {**counts, **self.weighted_loss.trace_counts()}

    def _params(self, obs: tf.Tensor) -> tf.Tensor:
        return forward_pass.dist_params(self.spec, self.variables, obs)

    def _log_prob(self, obs: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        return distributions.log_prob(self.spec, self._params(obs), actions)

    # --------------------------------------------------------------- policy
    def dist_params(self, obs: np.ndarray) -> np.ndarray:
        """Distribution parameters ``[B, num_params]`` for observations ``[B, *obs_shape]``."""
        return self._dist_params_call(policy_inputs.as_obs(self.spec, obs, dtype=self.config.dtype))

    def rollout_policy(self):
        """The ``policy_fn`` for ``pgtwin_core.rollout.collect`` before the next update.

        With ``update_path='recompute'`` this is :meth:`rollout_params` on the weights as
        they are now (read once, not per call: take a new policy for each rollout); with
        ``'cached'`` it is a fresh ``eager.cached.RolloutRecording`` that the next update
        differentiates. A path that rolls out with :meth:`dist_params` gets that instead.
        """
        policy = self.update_path.rollout_policy()
        if policy != self.dist_params:
            return policy
        if self._rollout_snapshot is None:
            return self.rollout_params
        return self._rollout_snapshot()

    def rollout_params(self, obs: np.ndarray) -> np.ndarray:
        """:meth:`dist_params` as a rollout calls it, once per env step on ``[N, *obs_shape]``:
        XLA-compiled where ``eager.policy_call.rollout_compiled`` says so (equal to
        ``dist_params`` within a few ulps), else the same call."""
        if self._rollout_snapshot is None:
            return self._dist_params_call(policy_inputs.as_obs(self.spec, obs,
                                                               dtype=self.config.dtype))
        return self._rollout_snapshot()(obs)

    def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log pi(a|s) ``[B]`` in ``config.dtype``."""
        dtype = self.config.dtype
        obs = policy_inputs.as_obs(self.spec, obs, dtype=dtype)
        actions = policy_inputs.as_actions(self.spec, actions, obs.shape[0], dtype=dtype)
        return self._log_prob_fn(obs, actions).numpy()

    def per_sample_gradients(self, obs: np.ndarray, actions: np.ndarray,
                             method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient ``g_i`` of each ``log pi(a_i|s_i)``, not summed.
        The batch's loss gradient (:meth:`gradients`) is ``-sum_i w_i adv_i g_i``, with
        ``w_i = valid_i / num_valid`` and the advantages of :meth:`inputs` (plus the entropy
        bonus' gradient where ``entropy_coef`` is set; docs/baselines.md).

        ``method``: ``vectorized`` (pfor), ``analytic`` (one backward pass; every torso, the
        LSTM's gate layer summed over its window's steps) or ``loop``
        (one eager tape per sample; the slow reference). See ``eager/per_sample.py``. The arrays
        are read-only views of TensorFlow's buffers (no copy).
        """
        return self._per_sample_ops().gradients(obs, actions, method)

    def per_sample_sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        return self._per_sample_ops().sq_norms(obs, actions)

    def _per_sample_ops(self) -> PerSampleGradients:
        """The per-sample gradient functions (``eager/per_sample.py``), built on first use."""
        if self._per_sample is None:
            self._per_sample = PerSampleGradients(self)
        return self._per_sample

    @property
    def baseline_memory(self):
        """The episodic baselines' earlier-batch sums (``pgtwin_core.baseline_memory.BaselineMemory``;
        None for the other baselines): part of the training state, like the optimizer's."""
        return self.update_path.memory

    @property
    def value_net(self):
        """The value baseline's network (``eager/value_net.py``; None for the other
        baselines): its weights and optimizer are in the checkpoint."""
        return getattr(self.update_path, "value_net", None)

    # --------------------------------------------------------------- update
    def inputs(self, batch: Batch) -> TrainInputs:
        """The flat arrays an update on ``batch`` is fed (validated by ``training_inputs``)."""
        return training_inputs(batch, self.config, self.spec)

    def loss_value(self, batch: Batch) -> float:
        """The REINFORCE loss on ``batch`` (no update)."""
        return self.update_path.loss_value(batch)

    def gradients(self, batch: Batch) -> dict[str, np.ndarray]:
        """Gradient of the loss on ``batch`` by variable name (unclipped, not applied)."""
        return self.update_path.gradients(batch)

    def update(self, batch: Batch) -> dict[str, Any]:
        """One optimizer step on ``batch``; returns metrics.

        A non-finite loss or gradient skips the step (weights and optimizer state unchanged)
        and is reported as ``applied = False``.
        """
        return self.update_path.update(batch)

    def apply_gradients(self, grads: dict[str, np.ndarray]) -> bool:
        """Apply given gradients with the agent's optimizer; False (skipped) if non-finite."""
        return self.weighted_loss.apply(grads)

    def set_learning_rate(self, learning_rate: float) -> None:
        """The step size of the next updates (a schedule's value), into Keras' float32
        learning-rate variable (the compiled update reads it, it is not traced in)."""
        self.optimizer.learning_rate.assign(np.float32(learning_rate))

    # -------------------------------------------------------------- weights
    def get_weights(self) -> dict[str, np.ndarray]:
        """Current weights by canonical name."""
        return {name: v.numpy() for name, v in self.variables.items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights (validated against the spec: missing, extra or misshapen raise)."""
        weights = check_weights(self.spec, weights, dtype=self.config.dtype)
        for name, v in self.variables.items():
            v.assign(weights[name])

    def variable_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """``{name: (shape, dtype)}`` of the policy variables, as TensorFlow names them."""
        return {v.name.split(":")[0]: (tuple(v.shape.as_list()), v.dtype.name)
                for v in self.variables.values()}

    def save(self, path: str | os.PathLike) -> str:
        """Write a ``tf.train.Checkpoint`` (weights and optimizer state) at prefix ``path``."""
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return self.checkpoint.write(path)

    def restore(self, path: str | os.PathLike) -> None:
        """Restore a checkpoint written by :meth:`save` (every value must match).

        ``path``: the prefix :meth:`save` returned, or a directory holding one checkpoint
        (``pgtwin.mode_agnostic.checkpoint_reader.checkpoint_prefix``).

        Raises ``IncompatibleCheckpointError`` (nothing restored) when the checkpoint's
        variables, shapes, dtypes or optimizer differ from this agent's, with the legacy
        twin's message.
        """
        memory = getattr(self.update_path, "checkpointed", {}).get("baseline_memory")
        held = held_memory(memory.vars) if memory is not None else {}
        path = checkpoint_prefix(path)
        check_layout(path, saved_layout(path),
                     dataclasses.replace(agent_layout(self.spec, self.config), memory=held))
        checkpoint = self.checkpoint
        if hasattr(checkpoint, "baseline_memory") and not saved_memory(path):
            # Saved before the memory was the agent's: the run's baseline_memory.npz holds it.
            checkpoint = tf.train.Checkpoint(
                policy=self.policy, optimizer=self.optimizer,
                **{k: v for k, v in getattr(self.update_path, "checkpointed", {}).items()
                   if k != "baseline_memory"})
        checkpoint.read(path).assert_consumed()

    def close(self) -> None:
        """Nothing to release (mirrors the legacy twin's ``close``)."""
