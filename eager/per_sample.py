"""Per-sample gradients of log pi(a_i|s_i) for TF2: loop, vectorized, analytic, norms.

Mirrors ``legacy_graph/per_sample.py`` function for function; the only difference is how a
gradient is taken (a ``GradientTape`` here, ``tf.gradients`` there).

``tape.gradient(log_probs, w)`` of a ``[B]`` vector sums over the batch (seed 001's trap:
its TF2 answer does exactly that), so the gradient of each sample's log-probability needs:

* ``loop``: one eager tape per sample, no ``tf.function`` (how TF2 code without one would
  write it): the reference, and slow (op-by-op dispatch, per sample).
* ``vectorized``: ``tf.vectorized_map`` (pfor) rewrites the one-sample gradient graph into
  batched ops. ``fallback_to_while_loop=False``: an op pfor cannot batch raises instead of
  silently turning the whole thing into a while loop.
* ``analytic`` (MLP torsos; Goodfellow 2015, "Efficient per-example gradient computations"):
  for a dense layer ``z = a W + b``, ``d log pi_i / dW = a_i^T delta_i`` and
  ``d log pi_i / db = delta_i`` with ``delta_i = d log pi_i / d z_i``. As ``log pi_i`` depends
  on sample i's activations only, every ``delta_i`` comes out of ONE backward pass of
  ``sum_i log pi_i`` taken at the pre-activations.
* ``ghost_sq_norms``: ``||a_i^T delta_i||_F^2 = ||a_i||^2 ||delta_i||^2`` (a rank-one matrix),
  so the squared norm of a sample's whole gradient needs no ``[B, in, out]`` tensor.

``tape.jacobian`` / ``tf.gradients`` per output over the batch costs O(B^2) and is never used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from pgtwin_core import policy_inputs, row_buckets
from pgtwin_core.specs import PolicySpec

from eager import distributions, network
from eager.policy_call import direct_callable

METHODS = ("loop", "vectorized", "analytic")


def sum_log_prob(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                 actions: tf.Tensor) -> tf.Tensor:
    """``sum_i log pi(a_i|s_i)``, a scalar; its gradient is the sum of the per-sample ones.

    Args:
      w: weights by canonical name (variables or tensors; carry gradient).
      obs: ``[B, *obs_shape]``; actions: int64 ``[B]`` or ``[B, action_dim]`` (data).
    """
    return tf.reduce_sum(distributions.log_prob(spec, network.dist_params(spec, w, obs), actions))


def vectorized_gradients(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                         actions: tf.Tensor) -> list[tf.Tensor]:
    """``[B, *shape]`` gradient of each ``log pi(a_i|s_i)`` per weight, in ``w``'s order.

    ``w`` must be tensors read outside the map (e.g. ``v.value()``): pfor treats them as
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


@dataclass(frozen=True)
class DenseLayer:
    """One dense layer of a traced forward pass, applied at one or more steps with the same
    weights: ``pre_activations[t] = inputs[:, t] @ kernel + bias``.

    An MLP layer runs once: ``inputs`` is ``[B, in]``. The LSTM's gate layer runs at each of
    the window's K steps: ``inputs`` is ``[B, K, in]`` (``[x_t, h_{t-1}]`` per step), and a
    sample's gradient sums its K steps' outer products.
    """

    kernel: str
    """Canonical name of the kernel, e.g. ``policy/dense_0/kernel``."""
    bias: str
    """Canonical name of the bias."""
    inputs: tf.Tensor
    """``[B, in]`` or ``[B, K, in]``: the layer's input a_i (carries gradient)."""
    pre_activations: list[tf.Tensor]
    """``[B, out]`` each, one per step: z_i, where delta_i is taken."""


def traced_dist_params(spec: PolicySpec, w: dict[str, tf.Tensor],
                       obs: tf.Tensor) -> tuple[tf.Tensor, list[DenseLayer]]:
    """``network.dist_params``, also returning every dense layer's tensors (the LSTM's too).

    Same ops as ``network.dist_params`` (the tests compare them); the head is the last layer.
    """
    act = tf.tanh if spec.activation == "tanh" else tf.nn.relu
    layers, x = [], obs
    if spec.torso == "lstm":
        x, step_inputs, step_pre = network.lstm_steps(spec, w, obs)
        layers.append(DenseLayer("policy/lstm/kernel", "policy/lstm/bias",
                                 tf.stack(step_inputs, axis=1), step_pre))
    scopes = [f"policy/dense_{i}" for i in range(len(spec.dense_sizes))] + ["policy/head"]
    for scope in scopes:
        z = network.dense(x, w[f"{scope}/kernel"], w[f"{scope}/bias"])
        layers.append(DenseLayer(f"{scope}/kernel", f"{scope}/bias", x, [z]))
        x = act(z)
    (z,) = layers[-1].pre_activations
    if spec.is_discrete:
        return z, layers
    log_std = w["policy/log_std"] + tf.zeros_like(z)
    return tf.concat([network.squash_mean(spec, z), log_std], axis=1), layers


@dataclass(frozen=True)
class LayerDeltas:
    """A traced forward pass and ``d sum_i log pi_i`` at its pre-activations (one backward pass)."""

    params: tf.Tensor
    """``[B, num_params]`` distribution parameters."""
    log_probs: tf.Tensor
    """``[B]`` log pi(a_i|s_i) (carries gradient)."""
    layers: list[DenseLayer]
    deltas: list[tf.Tensor]
    """Per layer, delta_i = d log pi_i / d z_i: ``[B, out]``, or ``[B, K, out]`` for a
    layer run at K steps (stacked like its inputs)."""
    log_std_grads: tf.Tensor | None
    """``[B, action_dim]``: d log pi_i / d log_std (Gaussian), else None."""


def layer_deltas(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                 actions: tf.Tensor) -> LayerDeltas:
    """One forward and one backward pass giving every sample's delta at every dense layer."""
    with tf.GradientTape() as tape:
        tape.watch(list(w.values()))
        params, layers = traced_dist_params(spec, w, obs)
        log_probs = distributions.log_prob(spec, params, actions)
        total = tf.reduce_sum(log_probs)  # inside the tape: the target must be recorded
    grads = tape.gradient(total, delta_targets(params, layers))
    return deltas_from_gradients(spec, params, log_probs, layers, grads)


def delta_targets(params: tf.Tensor, layers: list[DenseLayer]) -> list[tf.Tensor]:
    """What ``sum_i log pi_i`` is differentiated at: every pre-activation, then the params."""
    return [z for layer in layers for z in layer.pre_activations] + [params]


def deltas_from_gradients(spec: PolicySpec, params: tf.Tensor, log_probs: tf.Tensor,
                          layers: list[DenseLayer], grads: list[tf.Tensor]) -> LayerDeltas:
    """Package ``d sum_i log pi_i / d delta_targets(params, layers)`` as :class:`LayerDeltas`."""
    # log_std enters the params as a broadcast, so sample i's own slice of the params
    # gradient is d log pi_i / d log_std.
    log_std_grads = None if spec.is_discrete else grads[-1][:, spec.action_size:]
    deltas, start = [], 0
    for layer in layers:
        steps = grads[start:start + len(layer.pre_activations)]
        start += len(steps)
        deltas.append(tf.stack(steps, axis=1) if layer.inputs.shape.rank == 3 else steps[0])
    return LayerDeltas(params, log_probs, layers, deltas, log_std_grads)


def analytic_gradients(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                       actions: tf.Tensor) -> list[tf.Tensor]:
    """``[B, *shape]`` per-sample gradients from one backward pass, in ``spec.weight_shapes()`` order.

    Dense layer: ``a_i^T delta_i`` and ``delta_i``. The LSTM's gate layer, shared by the
    window's K steps: ``sum_t a_it^T delta_it`` (one batched matmul) and ``sum_t delta_it``.
    """
    traced = layer_deltas(spec, w, obs, actions)
    out = {}
    for layer, delta in zip(traced.layers, traced.deltas):
        if layer.inputs.shape.rank == 3:
            out[layer.kernel] = tf.matmul(layer.inputs, delta, transpose_a=True)
            out[layer.bias] = tf.reduce_sum(delta, axis=1)
        else:
            # einsum lowers to a batched matmul: ~1.7x faster here than a broadcast multiply.
            out[layer.kernel] = tf.einsum("bi,bo->bio", layer.inputs, delta)
            out[layer.bias] = delta
    if traced.log_std_grads is not None:
        out["policy/log_std"] = traced.log_std_grads
    return [out[name] for name in spec.weight_shapes()]


def _rows(x: tf.Tensor) -> tf.Tensor:
    """``[B, K, n] -> [B * K, n]``; ``[B, n]`` unchanged: one row per (sample, step)."""
    return tf.reshape(x, [-1, x.shape[-1]]) if x.shape.rank == 3 else x


def weighted_gradient(spec: PolicySpec, traced: LayerDeltas, coefficients: tf.Tensor) -> list[tf.Tensor]:
    """``sum_i c_i grad log pi_i`` per weight (``spec.weight_shapes()`` order), from the deltas.

    The last step of an ordinary backward pass of ``sum_i c_i log pi_i``: as each log pi_i
    depends on its own sample only, that loss has delta ``c_i delta_i`` at every layer, so
    the kernel gradient is ``a^T (c * delta)`` (rows over samples, and steps for the LSTM)
    and the bias one the sum of ``c * delta``. The chain down the layers is the one
    ``traced`` already ran, and is not run again.

    Args:
      coefficients: ``[B]``, c_i (data: no gradient flows into it).
    """
    c = tf.stop_gradient(coefficients)[:, None]
    out = {}
    for layer, delta in zip(traced.layers, traced.deltas):
        scaled = _rows(c[:, :, None] * delta if delta.shape.rank == 3 else c * delta)
        out[layer.kernel] = tf.matmul(_rows(layer.inputs), scaled, transpose_a=True)
        out[layer.bias] = tf.reduce_sum(scaled, axis=0)
    if traced.log_std_grads is not None:
        out["policy/log_std"] = tf.reduce_sum(c * traced.log_std_grads, axis=0)
    return [out[name] for name in spec.weight_shapes()]


def ghost_sq_norms(traced: LayerDeltas) -> tf.Tensor:
    """``[B]``: ``||grad log pi_i||^2`` over all weights, never materialising a gradient.

    Dense layer: ``(||a_i||^2 + 1) ||delta_i||^2`` (kernel plus bias: ``a_i^T delta_i`` is
    rank one). The LSTM's gate layer, whose gradient ``sum_t a_t^T delta_t`` sums K steps:
    ``sum_{t,s} (a_t . a_s + 1)(delta_t . delta_s)``, from two ``[B, K, K]`` Gram matrices
    (the sequence ghost norm of Li et al. 2022). Plus ``||d log_std_i||^2``.
    """
    total = 0.0
    for layer, delta in zip(traced.layers, traced.deltas):
        a = layer.inputs
        if a.shape.rank == 3:
            gram_a = tf.matmul(a, a, transpose_b=True)
            gram_d = tf.matmul(delta, delta, transpose_b=True)
            total += tf.reduce_sum((gram_a + 1.0) * gram_d, axis=[1, 2])
        else:
            a_sq = tf.reduce_sum(tf.square(a), axis=1)
            total += (a_sq + 1.0) * tf.reduce_sum(tf.square(delta), axis=1)
    if traced.log_std_grads is not None:
        total += tf.reduce_sum(tf.square(traced.log_std_grads), axis=1)
    return total


def sq_norms(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
             actions: tf.Tensor) -> tf.Tensor:
    """``[B]`` squared norms of the per-sample gradients, by ghost norms (every torso)."""
    return ghost_sq_norms(layer_deltas(spec, w, obs, actions))


def read_weights(variables: dict[str, tf.Variable]) -> dict[str, tf.Tensor]:
    """One read of each variable, as tensors a per-sample graph differentiates."""
    return {name: v.value() for name, v in variables.items()}


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
            sig = a._signatures()  # noqa: SLF001 (same twin: the agent's batch signatures)
            bodies = {
                "vectorized": lambda obs, actions: vectorized_gradients(
                    spec, read_weights(a.variables), obs, actions),
                "analytic": lambda obs, actions: analytic_gradients(spec, a.variables, obs, actions),
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
        obs = policy_inputs.as_obs(self._agent.spec, obs)
        return obs, policy_inputs.as_actions(self._agent.spec, actions, obs.shape[0])

    def gradients(self, obs: np.ndarray, actions: np.ndarray,
                  method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient of each ``log pi(a_i|s_i)`` (see the module doc).

        The arrays are read-only views of TensorFlow's buffers (no copy); ``.copy()`` one to
        write into it.
        """
        if method not in METHODS:
            raise ValueError(f"per_sample_gradients: method={method!r} is not one of {METHODS}")
        obs, actions = self._inputs(obs, actions)
        names, n = list(self._agent.variables), obs.shape[0]
        if method == "loop":
            rows = [self._loop(obs[i:i + 1], actions[i:i + 1]) for i in range(n)]
            return {name: np.stack([r[k].numpy() for r in rows]) for k, name in enumerate(names)}
        # np.asarray views the tensor's buffer; .numpy() would copy it (~40 MB at B = 2048 for
        # a (64, 64) MLP, which took longer than computing it). [:n] drops the bucket's padding.
        return {name: np.asarray(g)[:n] for name, g in zip(names, self._call(method, obs, actions))}

    def sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        obs, actions = self._inputs(obs, actions)
        (norms,) = self._call("sq_norms", obs, actions)
        return norms.numpy()[:obs.shape[0]]
