"""Per-sample gradients of log pi(a_i|s_i), as TF1 graph ops: how they are taken and run.

The methods and the math they share are ``pgtwin.mode_agnostic.per_sample``'s. What is this
twin's own, and mirrors ``eager/per_sample.py`` function for function: the gradients are
taken with ``tf.gradients`` (the eager twin records a ``GradientTape``), and the ops are built
once in the agent's graph, for a dynamic batch, and run through a Session callable.

* ``loop``: one ``tf.gradients`` per sample, built once and run on one-sample slices (the
  seed's TF1 answer): a session call each.
* ``vectorized``: ``tf.vectorized_map`` of that one-sample gradient graph, with
  ``fallback_to_while_loop=False``: an op pfor cannot batch raises instead of silently turning
  the whole thing into a while loop.
* ``analytic`` and the ghost norms: one ``tf.gradients`` backward pass at the pre-activations.
* XLA: one compiled function in the graph per method (:func:`xla_compiled`).
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

from legacy_graph.policy_call import direct_callable

tf1 = tf.compat.v1


def vectorized_gradients(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                         actions: tf.Tensor) -> list[tf.Tensor]:
    """``[B, *shape]`` gradient of each ``log pi(a_i|s_i)`` per weight, in ``w``'s order.

    ``w`` must be tensors read outside the map (``read_weights``): pfor treats them as
    loop invariants. Raises ``ValueError`` if an op of the one-sample graph has no pfor
    converter (no silent while-loop fallback).
    """
    names = list(w)

    def one_sample(args):
        obs_i, action_i = args
        logp = sum_log_prob(spec, w, obs_i[None], action_i[None])
        return tf.gradients(logp, [w[n] for n in names])

    return tf.vectorized_map(one_sample, (obs, actions), fallback_to_while_loop=False)


def layer_deltas(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
                 actions: tf.Tensor) -> LayerDeltas:
    """One forward and one ``tf.gradients`` backward pass giving every sample's delta at every
    dense layer (``pgtwin.mode_agnostic.per_sample.LayerDeltas``)."""
    params, layers = traced_dist_params(spec, w, obs)
    log_probs = distributions.log_prob(spec, params, actions)
    total = tf.reduce_sum(log_probs)
    grads = tf.gradients(total, delta_targets(params, layers))
    return deltas_from_gradients(spec, params, log_probs, layers, grads)


def sq_norms(spec: PolicySpec, w: dict[str, tf.Tensor], obs: tf.Tensor,
             actions: tf.Tensor) -> tf.Tensor:
    """``[B]`` squared norms of the per-sample gradients, by ghost norms (every torso)."""
    return ghost_sq_norms(layer_deltas(spec, w, obs, actions))


def xla_compiled(body, inputs: list[tf.Tensor], name: str) -> list[tf.Tensor]:
    """``body(*inputs)`` built as ONE XLA computation of the current graph: a function in the
    graph (``tf.function(jit_compile=True)`` called while the graph is built, which adds one
    ``StatefulPartitionedCall`` op that the Session runs as a single compiled launch).

    Why not TF1's own APIs: ``jit_scope`` was measured to split the same ops into seven
    clusters (one per variable read, plus stray ops), each paying XLA's launch cost (at B = 32
    that tripled the time); ``tf.xla.experimental.compile`` builds one cluster from the same
    HLO, but its launch measured 7-14 % slower on the episodic update (docs/benchmarks.md
    section 6, twenty-seventh session), and it is deprecated in favour of this. The graph
    stays a TF1 graph: placeholders in, Session callables out; the function captures the
    graph's resource variables, so an optimizer step inside it updates them.

    Args:
      body: ``(*tensors) -> list of tensors``; builds ops (in the function's graph).
      inputs: the tensors (placeholders) it takes; their unknown dimensions stay unknown, and
        XLA compiles once per concrete shape fed.
      name: the function's name in the graph's library (``__inference_{name}_N``), which
        profiles and graph dumps show.
    """
    def function(*args):
        return body(*args)

    function.__name__ = name
    compiled = tf.function(function, jit_compile=True, autograph=False)
    return list(compiled(*inputs))


class PerSampleGradients:
    """An agent's per-sample gradient ops: built in its graph on first use, then cached.

    All ops take the agent's dynamic-batch placeholders, so one graph serves every batch
    size; each is run through a direct Session callable. With ``config.jit_compile`` (the
    default) the ``vectorized`` and ``analytic`` ops are built by ``xla_compiled``: one XLA
    computation each (at B = 2048 both ran ~1.5x faster; at B = 32 ``analytic`` 2.4x, as the
    plain graph's oneDNN einsum is slow on small batches), run in the calling thread. XLA
    compiles once per input shape, so their rows are padded up to
    ``pgtwin_core.row_buckets.bucket_size`` and the padding sliced off the outputs. ``loop``,
    the reference, and the ghost norms stay plain.
    """

    def __init__(self, agent):
        self._agent = agent
        self._fns: dict[str, object] = {}

    def _fn(self, key: str):
        if key not in self._fns:
            a, spec = self._agent, self._agent.spec
            args = (a.obs_ph, a.actions_ph)
            bodies = {
                # the gradient of one sample: fed a one-row slice
                "loop": lambda obs, actions: tf.gradients(
                    sum_log_prob(spec, a.variables, obs, actions), list(a.variables.values())),
                "vectorized": lambda obs, actions: vectorized_gradients(
                    spec, read_weights(a.variables), obs, actions),
                "analytic": lambda obs, actions: gradients_from_deltas(
                    spec, layer_deltas(spec, a.variables, obs, actions)),
                "sq_norms": lambda obs, actions: [sq_norms(spec, read_weights(a.variables), obs,
                                                           actions)],
            }
            with a.graph.as_default(), tf1.name_scope(f"per_sample_{key}"):
                if self._compiled(key):
                    fetch = xla_compiled(bodies[key], list(args), f"per_sample_{key}")
                else:
                    fetch = bodies[key](*args)
            # A compiled key is one XLA op: run in the calling thread, it loses no
            # inter-op parallelism and saves the hand-off to the Session's pool and back,
            # which on a busy machine waits for that thread to be scheduled.
            self._fns[key] = direct_callable(a.session, fetch, list(args),
                                             caller_thread=self._compiled(key))
        return self._fns[key]

    def _compiled(self, key: str) -> bool:
        """Whether ``key``'s ops are XLA-compiled: ``vectorized`` and ``analytic`` under
        ``config.jit_compile``. Not the ghost norms: plain ops ran them faster at B = 32 and
        256 (0.06 / 0.08 ms against 0.08 / 0.17 ms) and nearly as fast at 2048 (0.60 / 0.52)."""
        return self._agent.config.jit_compile and key in ("vectorized", "analytic")

    def _call(self, key: str, obs: np.ndarray, actions: np.ndarray) -> list[np.ndarray]:
        """``key``'s ops on validated inputs, padded to a bucket when XLA-compiled."""
        if self._compiled(key):
            size = row_buckets.bucket_size(obs.shape[0])
            obs, actions = row_buckets.pad_rows(obs, size), row_buckets.pad_rows(actions, size)
        return self._fn(key)(obs, actions)

    def _inputs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        spec, dtype = self._agent.spec, self._agent.config.dtype
        obs = policy_inputs.as_obs(spec, obs, dtype=dtype)
        return obs, policy_inputs.as_actions(spec, actions, obs.shape[0], dtype=dtype)

    def gradients(self, obs: np.ndarray, actions: np.ndarray,
                  method: str = "vectorized") -> dict[str, np.ndarray]:
        """``{name: [B, *shape]}``: the gradient of each ``log pi(a_i|s_i)`` (see the module doc)."""
        check_method(method)
        obs, actions = self._inputs(obs, actions)
        names, n = list(self._agent.variables), obs.shape[0]
        if method == "loop":
            fn = self._fn(method)
            rows = [fn(obs[i:i + 1], actions[i:i + 1]) for i in range(n)]
            return {name: np.stack([r[k] for r in rows]) for k, name in enumerate(names)}
        # [:n] drops the bucket's padding (a view, no copy).
        full = dict(zip(names, self._call(method, obs, actions)))
        warn_on_fresh_pages(full, stacklevel=4)
        return {name: g[:n] for name, g in full.items()}

    def sq_norms(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``[B]``: ``||grad log pi(a_i|s_i)||^2`` over all weights (ghost norms for an MLP)."""
        obs, actions = self._inputs(obs, actions)
        (norms,) = self._call("sq_norms", obs, actions)
        return norms[:obs.shape[0]]
