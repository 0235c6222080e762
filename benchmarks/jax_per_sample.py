"""The CartPole policy and its gradients in JAX: what a user would pick instead of pgtwin.

The benchmark group ``per-sample vs JAX`` (``benchmarks/test_jax_per_sample.py``) times
pgtwin's per-sample methods against JAX's own answer to the same question, on the same
network, weights and batch:

* :func:`per_sample_gradients`: ``jax.jit(jax.vmap(jax.grad(log pi(a_i|s_i))))``, the way
  JAX's documentation takes per-example gradients;
* :func:`aggregated_gradient`: ``jax.jit(jax.grad(loss))`` of the REINFORCE loss
  ``-sum_i w_i A_i log pi(a_i|s_i)`` (``pgtwin.mode_agnostic.loss.reinforce_loss`` with
  ``entropy_coef = 0``, the config's default), JAX's counterpart of each twin's one gradient.

The network is ``pgtwin_core.specs``'s MLP with a categorical head, written again in
``jax.numpy`` (``pgtwin.mode_agnostic.forward_pass`` is TensorFlow): ``x = act(x @ kernel
+ bias)`` per hidden layer, ``logits = x @ head/kernel + head/bias``, ``log pi(a|s) =
log_softmax(logits)[a]``. Weights are the numpy arrays of ``pgtwin_core.specs.init_weights``
under their canonical names, placed on JAX's device once (:func:`device_weights`); the batch
goes in and the gradients come out as numpy, as with pgtwin's methods.

Imports JAX: only the JAX benchmark imports this module, after ``pytest.importorskip("jax")``.
JAX is the optional ``jax`` extra of setup.cfg, never a test dependency.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pgtwin_core.specs import PolicySpec

Weights = dict[str, jax.Array]
"""Weights by canonical name, on JAX's device (:func:`device_weights`)."""
Grads = dict[str, np.ndarray]


def check_spec(spec: PolicySpec) -> None:
    """Raise ``ValueError`` unless ``spec`` is what this module writes: a categorical MLP."""
    if spec.torso != "mlp" or not spec.is_discrete:
        raise ValueError(f"jax_per_sample: spec has torso={spec.torso!r}, distribution="
                         f"{spec.distribution!r}; only the categorical MLP is written in JAX")


def log_probs(spec: PolicySpec, w: Weights, obs: jax.Array,
              actions: jax.Array) -> jax.Array:
    """``[B]`` log pi(a_i|s_i) of the categorical MLP.

    Args:
      w: weights by canonical name (``policy/dense_0/kernel`` ...; carry gradient).
      obs: ``[B, obs_dim]`` float; actions: int ``[B]`` action indices (data).
    """
    act = jnp.tanh if spec.activation == "tanh" else jax.nn.relu
    x = obs
    for i in range(len(spec.dense_sizes)):
        x = act(x @ w[f"policy/dense_{i}/kernel"] + w[f"policy/dense_{i}/bias"])
    logits = x @ w["policy/head/kernel"] + w["policy/head/bias"]
    return jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=1)[:, 0]


def _numpy(tree: dict[str, jax.Array]) -> Grads:
    """``{name: numpy array}``; ``np.asarray`` waits for JAX's asynchronous dispatch to finish."""
    return {name: np.asarray(g) for name, g in tree.items()}


def per_sample_gradients(spec: PolicySpec) -> Callable[[Weights, np.ndarray, np.ndarray], Grads]:
    """``(weights, obs, actions) -> {name: [B, *shape]}``: ``d log pi(a_i|s_i) / d name``.

    ``jit(vmap(grad))`` of one sample's log-probability, mapped over the batch with the
    weights shared (``in_axes=None``). ``actions`` are int32 (JAX's default integer width).
    """
    check_spec(spec)

    def one(w, obs_i, action_i):
        return log_probs(spec, w, obs_i[None], action_i[None])[0]

    fn = jax.jit(jax.vmap(jax.grad(one), in_axes=(None, 0, 0)))
    return lambda w, obs, actions: _numpy(fn(w, obs, actions))


def aggregated_gradient(spec: PolicySpec) -> Callable[..., Grads]:
    """``(weights, obs, actions, advantages, batch_weights) -> {name: shape}``: the gradient
    of ``-sum_i w_i A_i log pi(a_i|s_i)`` (``advantages``, ``batch_weights``: ``[B]``, data)."""
    check_spec(spec)

    def loss(w, obs, actions, advantages, batch_weights):
        return -jnp.sum(batch_weights * advantages * log_probs(spec, w, obs, actions))

    fn = jax.jit(jax.grad(loss))
    return lambda w, *batch: _numpy(fn(w, *batch))


def device_weights(weights: dict[str, np.ndarray]) -> Weights:
    """The numpy weights as JAX arrays, placed once (not re-sent with every call)."""
    return {name: jnp.asarray(v) for name, v in weights.items()}
