"""Per-sample gradients of log pi(a_i|s_i): the math both twins share.

``tf.gradients(log_probs, w)`` (TF1) and ``tape.gradient(log_probs, w)`` (TF2) of a ``[B]``
vector sum over the batch, so the gradient of each sample's log-probability needs one of
three methods, named in :data:`METHODS`:

* ``loop``: one gradient per one-sample slice: the reference, and slow.
* ``vectorized``: ``tf.vectorized_map`` (pfor) rewrites the one-sample gradient graph into
  batched ops.
* ``analytic`` (Goodfellow 2015, "Efficient per-example gradient computations"): for a dense
  layer ``z = a W + b``, ``d log pi_i / dW = a_i^T delta_i`` and ``d log pi_i / db = delta_i``
  with ``delta_i = d log pi_i / d z_i``. As ``log pi_i`` depends on sample i's activations
  only, every ``delta_i`` comes out of ONE backward pass of ``sum_i log pi_i`` taken at the
  pre-activations (:func:`delta_targets`).

and the squared norm of a sample's whole gradient needs no ``[B, in, out]`` tensor:
``||a_i^T delta_i||_F^2 = ||a_i||^2 ||delta_i||^2`` (:func:`ghost_sq_norms`).
``tape.jacobian`` / ``tf.gradients`` per output over the batch costs O(B^2) and is never used.

This module holds what is the same in both modes: the traced forward pass
(:func:`traced_dist_params`), the packaging of the backward pass's result
(:func:`deltas_from_gradients`) and everything computed from the deltas. Taking that backward
pass (``tf.gradients``, or a ``GradientTape`` around the forward pass), the ``loop`` and
``vectorized`` methods, and how the ops are run are each twin's ``per_sample.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from pgtwin_core.specs import PolicySpec

from pgtwin.mode_agnostic import distributions, forward_pass

METHODS = ("loop", "vectorized", "analytic")


def check_method(method: str) -> None:
    """Raise ``ValueError`` naming ``method`` unless it is one of :data:`METHODS`."""
    if method not in METHODS:
        raise ValueError(f"per_sample_gradients: method={method!r} is not one of {METHODS}")


def sum_log_prob(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                 actions: tf.Tensor) -> tf.Tensor:
    """``sum_i log pi(a_i|s_i)``, a scalar; its gradient is the sum of the per-sample ones.

    Args:
      w: weights by canonical name (variables or tensors; carry gradient).
      obs: ``[B, *obs_shape]``; actions: int64 ``[B]`` or ``[B, action_dim]`` (data).
    """
    return tf.reduce_sum(distributions.log_prob(spec, forward_pass.dist_params(spec, w, obs),
                                                actions))


def read_weights(variables: dict[str, tf.Variable]) -> dict[str, tf.Tensor]:
    """One read of each variable, as tensors a per-sample graph differentiates.

    ``tf.vectorized_map`` needs the weights as loop invariants read outside the map.
    """
    return {name: v.value() for name, v in variables.items()}


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


NARROW = 8
"""Output width up to which a dense layer's gradient to its input is taken as broadcast
products (:func:`_traced_dense`)."""


def _traced_dense(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """``forward_pass.dense`` (the same ops, the same numbers), whose gradient to ``x``
    (``dz @ kernel^T``) is, for a layer of at most :data:`NARROW` outputs, a sum of
    ``out`` broadcast products, which XLA fuses into the activation's gradient: as a
    product of contraction size ``out`` (2 for CartPole's head) XLA's CPU code took 0.12 ms
    at B = 2048 (docs/benchmarks.md section 3). The gradients to ``kernel`` and ``bias``
    are the usual ones."""
    out = kernel.shape[-1]
    if x.shape.rank != 2 or out is None or out > NARROW:
        return forward_pass.dense(x, kernel, bias)

    @tf.custom_gradient
    def dense(x, kernel, bias):
        def grad(dz):
            dx = tf.add_n([dz[:, o:o + 1] * kernel[:, o] for o in range(out)])
            return dx, tf.matmul(x, dz, transpose_a=True), tf.reduce_sum(dz, axis=0)
        return forward_pass.dense(x, kernel, bias), grad
    return dense(x, kernel, bias)


def traced_dist_params(spec: PolicySpec, w: dict[str, tf.Tensor],
                       obs: tf.Tensor) -> tuple[tf.Tensor, list[DenseLayer]]:
    """``forward_pass.dist_params``, also returning every dense layer's tensors (the LSTM's too).

    Same ops as ``forward_pass.dist_params`` (the tests compare them); the head is the last
    layer. Returns the params ``[B, num_params]`` and the layers, input to output.
    """
    act = tf.tanh if spec.activation == "tanh" else tf.nn.relu
    layers, x = [], obs
    if spec.torso == "lstm":
        x, step_inputs, step_pre = forward_pass.lstm_steps(spec, w, obs)
        layers.append(DenseLayer("policy/lstm/kernel", "policy/lstm/bias",
                                 tf.stack(step_inputs, axis=1), step_pre))
    scopes = [f"policy/dense_{i}" for i in range(len(spec.dense_sizes))] + ["policy/head"]
    for scope in scopes:
        z = _traced_dense(x, w[f"{scope}/kernel"], w[f"{scope}/bias"])
        layers.append(DenseLayer(f"{scope}/kernel", f"{scope}/bias", x, [z]))
        x = act(z)
    (z,) = layers[-1].pre_activations
    if spec.is_discrete:
        return z, layers
    log_std = w["policy/log_std"] + tf.zeros_like(z)
    return tf.concat([forward_pass.squash_mean(spec, z), log_std], axis=1), layers


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


def gradients_from_deltas(spec: PolicySpec, traced: LayerDeltas) -> list[tf.Tensor]:
    """``[B, *shape]`` per-sample gradients, in ``spec.weight_shapes()`` order: the ``analytic``
    method's last step.

    Dense layer: ``a_i^T delta_i`` and ``delta_i``. The LSTM's gate layer, shared by the
    window's K steps: ``sum_t a_it^T delta_it`` (one batched matmul) and ``sum_t delta_it``.
    """
    out = {}
    for layer, delta in zip(traced.layers, traced.deltas):
        if layer.inputs.shape.rank == 3:
            out[layer.kernel] = tf.matmul(layer.inputs, delta, transpose_a=True)
            out[layer.bias] = tf.reduce_sum(delta, axis=1)
        else:
            # einsum lowers to a batched matmul, faster than a broadcast multiply.
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

    A zero delta gives a zero product even where ``||a_i||^2`` overflows: a saturated tanh
    passes no gradient back from an observation as large as 3e19 (float32), whose square is
    inf, and ``inf * 0`` would make that row's norm NaN where every gradient is finite.
    """
    total = 0.0
    for layer, delta in zip(traced.layers, traced.deltas):
        a = layer.inputs
        if a.shape.rank == 3:
            gram_a = tf.matmul(a, a, transpose_b=True)
            gram_d = tf.matmul(delta, delta, transpose_b=True)
            total += tf.reduce_sum(tf.math.multiply_no_nan(gram_a + 1.0, gram_d), axis=[1, 2])
        else:
            a_sq = tf.reduce_sum(tf.square(a), axis=1)
            total += tf.math.multiply_no_nan(a_sq + 1.0, tf.reduce_sum(tf.square(delta), axis=1))
    if traced.log_std_grads is not None:
        total += tf.reduce_sum(tf.square(traced.log_std_grads), axis=1)
    return total
