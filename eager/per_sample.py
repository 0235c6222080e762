"""Per-sample gradients of log pi(a_i|s_i) for TF2: how they are taken and run.

The methods and the math they share are ``pgtwin.mode_agnostic.per_sample``'s. What is this
twin's own, and mirrors ``legacy_graph/per_sample.py`` function for function: the gradients
are taken with a ``GradientTape`` (the legacy twin calls ``tf.gradients``), and the ops run as
``tf.function``s with a dynamic batch dimension, called directly (``eager/policy_call.py``).

* ``loop``: one eager tape per sample, no ``tf.function`` (how TF2 code without one would
  write it, seed 001's TF2 way done per sample): op-by-op dispatch, per sample.
* ``vectorized``: ``tf.vectorized_map`` of a one-sample tape, with
  ``fallback_to_while_loop=False``: an op pfor cannot batch raises instead of silently turning
  the whole thing into a while loop.
* ``analytic`` and the ghost norms: one tape around the forward pass, one backward pass at
  the pre-activations.
* XLA: ``tf.function(jit_compile=True)``.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs, row_buckets
from pgtwin_core.specs import PolicySpec

from pgtwin.mode_agnostic import distributions
from pgtwin.mode_agnostic.cpu_allocator import warn_on_fresh_pages
from pgtwin.mode_agnostic.per_sample import (LayerDeltas, check_method, delta_targets,
                                             deltas_from_gradients, ghost_sq_norms,
                                             gradients_from_deltas, read_weights, sum_log_prob,
                                             traced_dist_params)

from eager.gradient_step import checked_gradients
from eager.policy_call import direct_callable
from eager.tracing import batch_signatures


def vectorized_gradients(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                         actions: tf.Tensor) -> list[tf.Tensor]:
    """``[B, *shape]`` gradient of each ``log pi(a_i|s_i)`` per weight, in ``w``'s order.

    ``w`` must be tensors read outside the map (``read_weights``): pfor treats them as
    loop invariants, and each one-sample tape watches them. Raises ``ValueError`` if an op
    of the one-sample graph has no pfor converter (no silent while-loop fallback).
    """
    names = list(w)

    def one_sample(args):
        obs_i, action_i = args
        with tf.GradientTape() as tape:
            tape.watch([w[n] for n in names])
            logp = sum_log_prob(spec, w, obs_i[None], action_i[None])
        return tape.gradient(logp, [w[n] for n in names])

    return tf.vectorized_map(one_sample, (obs, actions), fallback_to_while_loop=False)


def layer_deltas(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                 actions: tf.Tensor) -> LayerDeltas:
    """One forward pass recorded on a ``GradientTape`` and one backward pass giving every
    sample's delta at every dense layer (``pgtwin.mode_agnostic.per_sample.LayerDeltas``)."""
    with tf.GradientTape() as tape:
        tape.watch(list(w.values()))
        params, layers = traced_dist_params(spec, w, obs)
        log_probs = distributions.log_prob(spec, params, actions)
        total = tf.reduce_sum(log_probs)  # inside the tape: the target must be recorded
    grads = tape.gradient(total, delta_targets(params, layers))
    return deltas_from_gradients(spec, params, log_probs, layers, grads)


def scored_deltas(spec: PolicySpec, variables: dict[str, tf.Variable], obs: tf.Tensor,
                  actions: tf.Tensor, weights: tf.Tensor, entropy_coef: float
                  ) -> tuple[LayerDeltas, tf.Tensor, tf.Tensor, list[tf.Tensor] | None]:
    """What an update built on the deltas needs, from one tape around one forward pass:
    ``(deltas, log_probs [B], entropies [B], bonus)``, ``deltas`` as ``layer_deltas``' and
    ``bonus`` the gradient of ``-entropy_coef * sum_i w_i H_i`` by variable (``variables``'
    order; None when ``entropy_coef`` is 0). ``weights``: ``[B]``, the loss's ``w_i``."""
    with tf.GradientTape(persistent=entropy_coef > 0) as tape:  # a second gradient for the bonus
        params, layers = traced_dist_params(spec, variables, obs)
        log_probs = distributions.log_prob(spec, params, actions)
        total = tf.reduce_sum(log_probs)
        entropies = distributions.entropy(spec, params)
        bonus_loss = -entropy_coef * tf.reduce_sum(weights * entropies)
    grads = tape.gradient(total, delta_targets(params, layers))
    deltas = deltas_from_gradients(spec, params, log_probs, layers, grads)
    bonus = checked_gradients(tape, bonus_loss, variables) if entropy_coef > 0 else None
    return deltas, log_probs, entropies, bonus


def sq_norms(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
             actions: tf.Tensor) -> tf.Tensor:
    """``[B]`` squared norms of the per-sample gradients, by ghost norms (every torso)."""
    return ghost_sq_norms(layer_deltas(spec, w, obs, actions))


class PerSampleGradients:
    """An agent's per-sample gradient ``tf.function``s: built on first use, then cached.

    Each has an input signature with a dynamic batch dimension, so it traces once for every
    batch size (``trace_counts``). With ``config.jit_compile`` (the default) XLA compiles
    them, which fuses the ``[B, in, out]`` outer products and pfor's batched ops into a few
    loops (``analytic`` at B = 2048: 1.7x faster; the LSTM's ``vectorized``: 4x). XLA
    compiles once per input shape, so the rows are padded up to
    ``pgtwin_core.row_buckets.bucket_size`` and the padding sliced off the outputs.
    """

    def __init__(self, agent):
        self._agent = agent
        self._fns: dict[str, tf.types.experimental.GenericFunction] = {}
        self._calls: dict[str, object] = {}

    def _fn(self, key: str):
        if key not in self._fns:
            a, spec = self._agent, self._agent.spec
            sig = batch_signatures(spec, a.config.dtype)
            bodies = {
                "vectorized": lambda obs, actions: vectorized_gradients(
                    spec, read_weights(a.variables), obs, actions),
                "analytic": lambda obs, actions: gradients_from_deltas(
                    spec, layer_deltas(spec, a.variables, obs, actions)),
                "sq_norms": lambda obs, actions: sq_norms(spec, read_weights(a.variables), obs, actions),
            }
            self._fns[key] = tf.function(bodies[key], input_signature=[sig["obs"], sig["actions"]],
                                         autograph=False, jit_compile=a.config.jit_compile)
        return self._fns[key]

    def _call(self, key: str, obs: np.ndarray, actions: np.ndarray) -> list[tf.Tensor]:
        """``key``'s function on validated inputs (padded to a bucket under XLA), through its
        direct callable (no Python of ``tf.function`` per call)."""
        if key not in self._calls:
            self._calls[key] = direct_callable(self._fn(key))
        if self._agent.config.jit_compile:
            size = row_buckets.bucket_size(obs.shape[0])
            obs, actions = row_buckets.pad_rows(obs, size), row_buckets.pad_rows(actions, size)
        return self._calls[key](obs, actions)

    def _loop(self, obs: np.ndarray, actions: np.ndarray) -> list[tf.Tensor]:
        """The gradient of one sample (a one-row slice), as TF2 code without ``tf.function``
        writes it: an eager tape, op by op (seed 001's TF2 way, done per sample)."""
        a = self._agent
        with tf.GradientTape() as tape:
            logp = sum_log_prob(a.spec, a.variables, tf.constant(obs), tf.constant(actions))
        return tape.gradient(logp, list(a.variables.values()))

    def trace_counts(self) -> dict[str, int]:
        """How often each built function has been traced (1, whatever the batch sizes)."""
        return {k: f.experimental_get_tracing_count() for k, f in self._fns.items()}

    def _inputs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        spec, dtype = self._agent.spec, self._agent.config.dtype
        obs = policy_inputs.as_obs(spec, obs, dtype=dtype)
        return obs, policy_inputs.as_actions(spec, actions, obs.shape[0], dtype=dtype)

    def gradients(self, obs: np.ndarray, actions: np.ndarray,
                  method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient of each ``log pi(a_i|s_i)`` (see the module doc).

        The arrays are read-only views of TensorFlow's buffers (no copy); ``.copy()`` one to
        write into it.
        """
        check_method(method)
        obs, actions = self._inputs(obs, actions)
        names, n = list(self._agent.variables), obs.shape[0]
        if method == "loop":
            rows = [self._loop(obs[i:i + 1], actions[i:i + 1]) for i in range(n)]
            return {name: np.stack([r[k].numpy() for r in rows]) for k, name in enumerate(names)}
        # np.asarray views the tensor's buffer; .numpy() would copy it (~40 MB at B = 2048 for
        # a (64, 64) MLP, which took longer than computing it). [:n] drops the bucket's padding.
        full = {name: np.asarray(g) for name, g in zip(names, self._call(method, obs, actions))}
        warn_on_fresh_pages(full, stacklevel=4)
        return {name: g[:n] for name, g in full.items()}

    def sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        obs, actions = self._inputs(obs, actions)
        (norms,) = self._call("sq_norms", obs, actions)
        return norms.numpy()[:obs.shape[0]]
