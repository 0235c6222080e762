"""REINFORCE, the TF1 way: one ``tf.Graph``, placeholders, ``tf.gradients``, one ``Session``.

Mirrors ``eager/agent.py`` method for method. Everything lives in the agent's own graph and
session, so this twin runs in the same process as the eager one without switching eager
execution off for the whole process. The hot paths (the rollout's policy call and the update) go
through session callables fixed once (``legacy_graph/policy_call.py``), which skip
``Session.run``'s per-call feed/fetch parsing. How a batch becomes an optimizer step is the
update path chosen once when the agent is built (``legacy_graph/update_paths.py``).
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
from pgtwin.mode_agnostic.loss import reinforce_loss

from legacy_graph import network
from legacy_graph.checkpoint_layout import held_memory, missing_memory, saved_layout
from legacy_graph.gradient_step import GivenGradientApply, checked_gradients, guarded_apply
from legacy_graph.optimizers import learning_rate_variable, make_optimizer
from legacy_graph.per_sample import PerSampleGradients
from legacy_graph.policy_call import policy_callable
from legacy_graph.update_paths import update_path
from legacy_graph.weighted_loss import WeightedLoss

tf1 = tf.compat.v1


class ReinforceAgent:
    """A REINFORCE learner built as a TF1 graph.

    Args:
      spec: the policy network.
      config: hyperparameters, ``config.dtype`` the dtype of every weight and computation.
      weights: initial numpy weights by canonical name; ``init_weights(spec, seed, dtype=...)``
        if None.
      seed: seeds the initial weights (when ``weights`` is None).
    """

    impl = "graph"

    def __init__(self, spec: PolicySpec, config: ReinforceConfig = ReinforceConfig(),
                 weights: dict[str, np.ndarray] | None = None, seed: int = 0):
        self.spec = spec
        self.config = config
        self.seed = seed
        """The seed of the initial weights (the value net's too: ``pgtwin_core.value_spec``)."""
        dtype = config.dtype
        weights = init_weights(spec, seed, dtype=dtype) if weights is None else weights
        weights = check_weights(spec, weights, dtype=dtype)
        self.graph = tf.Graph()
        with self.graph.as_default():
            self._build()
        self.session = tf1.Session(graph=self.graph)
        self.session.run(self._init_op)
        self.set_weights(weights)
        self._dist_params_fn = policy_callable(self.session, self.params, self.obs_ph)
        self._per_sample = None  # legacy_graph.per_sample.PerSampleGradients, built on first use
        self.weighted_loss = WeightedLoss(self)
        """The REINFORCE loss run on given inputs (``legacy_graph/weighted_loss.py``)."""
        with self.graph.as_default():
            self.update_path = update_path(self, self.weighted_loss)
            """How ``loss_value``, ``gradients`` and ``update`` are done (``pgtwin_core.update_path``)."""
            # After the path: the episodic paths add their memory variables to the graph.
            self.saver = tf1.train.Saver(var_list=tf1.global_variables(), max_to_keep=None)

    # ----------------------------------------------------------------- graph
    def _build(self) -> None:
        spec, dtype = self.spec, self.config.dtype
        self.variables = network.create_variables(spec, dtype)
        self.obs_ph = tf1.placeholder(dtype, [None, *spec.obs_shape], name="obs")
        act_shape = [None] if spec.is_discrete else [None, spec.action_size]
        self.actions_ph = tf1.placeholder(tf.int64 if spec.is_discrete else dtype, act_shape,
                                          name="actions")
        self.advantages_ph = tf1.placeholder(dtype, [None], name="advantages")
        self.weights_ph = tf1.placeholder(dtype, [None], name="weights")

        self.params = forward_pass.dist_params(spec, self.variables, self.obs_ph)
        self.log_probs = distributions.log_prob(spec, self.params, self.actions_ph)
        self.entropies = distributions.entropy(spec, self.params)
        self.entropy = tf.reduce_sum(self.weights_ph * self.entropies)
        self.loss = reinforce_loss(self.log_probs, self.advantages_ph, self.weights_ph,
                                   self.entropies, self.config.entropy_coef)
        self.grads = checked_gradients(self.loss, self.variables)
        self.grad_norm = tf.linalg.global_norm(self.grads)

        self.learning_rate = learning_rate_variable(self.config, dtype)
        self._lr_ph = tf1.placeholder(dtype, [], name="learning_rate_value")
        self._lr_assign = self.learning_rate.assign(self._lr_ph)
        self.optimizer = make_optimizer(self.config, dtype, self.learning_rate)
        clip = self.config.max_grad_norm
        self.train_op, self.applied = guarded_apply(self.optimizer, self.variables, self.grads,
                                                    self.loss, clip)
        self._given_apply: GivenGradientApply | None = None  # built on first use

        self.weight_phs = {name: tf1.placeholder(dtype, v.shape) for name, v in self.variables.items()}
        self.assign_op = tf.group(*[v.assign(self.weight_phs[n]) for n, v in self.variables.items()])
        self._init_op = tf.group(tf1.global_variables_initializer(),
                                 tf1.local_variables_initializer())

    def given_gradient_apply(self) -> GivenGradientApply:
        """The placeholders and guarded optimizer step for gradients given as numpy (the
        numpy estimators, the natural step), built into the graph on first use: most agents
        never apply a given gradient (building time: docs/benchmarks.md section 8). The
        optimizer's slots exist already (the train step made them), so this adds
        ops and no variable; a variable added here would be missing from the initialised
        state and the Saver, hence the check."""
        if self._given_apply is None:
            dtype = self.config.dtype
            with self.graph.as_default():
                before = len(tf1.global_variables())
                phs = {name: tf1.placeholder(dtype, v.shape, name=f"grad/{name}")
                       for name, v in self.variables.items()}
                op, applied = guarded_apply(self.optimizer, self.variables, list(phs.values()),
                                            tf.constant(0.0, dtype), self.config.max_grad_norm)
                if len(tf1.global_variables()) != before:
                    raise RuntimeError("building the given-gradient step created variables: "
                                       "the optimizer must make its slots in the train step")
            self._given_apply = GivenGradientApply(phs, op, applied)
        return self._given_apply

    # -------------------------------------------------------------- policy
    def dist_params(self, obs: np.ndarray) -> np.ndarray:
        """Distribution parameters ``[B, num_params]`` for observations ``[B, *obs_shape]``."""
        return self._dist_params_fn(policy_inputs.as_obs(self.spec, obs, dtype=self.config.dtype))

    def rollout_policy(self):
        """The ``policy_fn`` for ``pgtwin_core.rollout.collect`` before the next update.

        With ``update_path='recompute'`` this is :meth:`dist_params`; with ``'cached'`` it is a
        fresh ``legacy_graph.cached.RolloutRecording`` that the next update differentiates.
        """
        return self.update_path.rollout_policy()

    def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log pi(a|s) ``[B]`` in ``config.dtype``."""
        dtype = self.config.dtype
        obs = policy_inputs.as_obs(self.spec, obs, dtype=dtype)
        actions = policy_inputs.as_actions(self.spec, actions, obs.shape[0], dtype=dtype)
        return self.session.run(self.log_probs, {self.obs_ph: obs, self.actions_ph: actions})

    def per_sample_gradients(self, obs: np.ndarray, actions: np.ndarray,
                             method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient ``g_i`` of each ``log pi(a_i|s_i)``, not summed.
        The batch's loss gradient (:meth:`gradients`) is ``-sum_i w_i adv_i g_i``, with
        ``w_i = valid_i / num_valid`` and the advantages of :meth:`inputs` (plus the entropy
        bonus' gradient where ``entropy_coef`` is set; docs/baselines.md).

        ``method``: ``vectorized`` (pfor), ``analytic`` (one backward pass; every torso, the
        LSTM's gate layer summed over its window's steps) or ``loop``
        (one ``tf.gradients`` run per sample; the slow reference). See ``legacy_graph/per_sample.py``.
        """
        return self._per_sample_ops().gradients(obs, actions, method)

    def per_sample_sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        return self._per_sample_ops().sq_norms(obs, actions)

    def _per_sample_ops(self) -> PerSampleGradients:
        """The per-sample gradient ops (``legacy_graph/per_sample.py``), built on first use."""
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
        """The value baseline's network (``legacy_graph/value_net.py``; None for the other
        baselines): its weights and optimizer are in the graph, so in the ``Saver``'s checkpoint."""
        return getattr(self.update_path, "value_net", None)

    # -------------------------------------------------------------- update
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
        """The step size of the next updates (a schedule's value), rounded to float32 as
        Keras' variable rounds it in the eager twin."""
        value = np.float32(learning_rate).astype(self.config.dtype)
        self.session.run(self._lr_assign, {self._lr_ph: value})

    # ------------------------------------------------------------- weights
    def get_weights(self) -> dict[str, np.ndarray]:
        """Current weights by canonical name."""
        return dict(zip(self.variables, self.session.run(list(self.variables.values()))))

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights (validated against the spec: missing, extra or misshapen raise)."""
        weights = check_weights(self.spec, weights, dtype=self.config.dtype)
        self.session.run(self.assign_op, {self.weight_phs[n]: weights[n] for n in self.variables})

    def variable_info(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """``{name: (shape, dtype)}`` of the policy variables, as TensorFlow names them."""
        return {v.name.split(":")[0]: (tuple(v.shape.as_list()), v.dtype.base_dtype.name)
                for v in self.variables.values()}

    def save(self, path: str | os.PathLike) -> str:
        """Write a TF1 ``Saver`` checkpoint (weights and optimizer state) at prefix ``path``."""
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with self.graph.as_default():
            return self.saver.save(self.session, path, write_meta_graph=False)

    def restore(self, path: str | os.PathLike) -> None:
        """Restore a checkpoint written by :meth:`save`.

        ``path``: the prefix :meth:`save` returned, or a directory holding one checkpoint
        (``pgtwin.mode_agnostic.checkpoint_reader.checkpoint_prefix``).

        Raises ``IncompatibleCheckpointError`` (nothing restored) when the checkpoint's
        variables, shapes, dtypes or optimizer differ from this agent's: a ``Saver`` alone
        would load a (4, 64) kernel into a (4, 32) variable.
        """
        path = checkpoint_prefix(path)
        check_layout(path, saved_layout(path), dataclasses.replace(
            agent_layout(self.spec, self.config), memory=held_memory(self.graph)))
        with self.graph.as_default():
            saver = self.saver
            missing = missing_memory(path, self.graph)
            if missing:  # saved before the memory was the agent's: the run's npz holds it
                saver = tf1.train.Saver(var_list=[v for v in tf1.global_variables()
                                                  if v not in missing])
            saver.restore(self.session, path)

    def close(self) -> None:
        """Release the session."""
        self.session.close()
