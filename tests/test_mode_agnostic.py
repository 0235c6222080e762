"""The TensorFlow code both twins share (``pgtwin.mode_agnostic``) against a numpy oracle.

There is one copy of the forward pass, the distributions, the loss and the per-sample math,
so comparing the twins cannot check it: each function is checked here against
``tests.numpy_policy`` (the same network written again in numpy, per-sample gradients by
central differences), once built in a TF1 graph and run by a Session, once run eagerly, as
the two twins run it. float64 throughout.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from eager import per_sample as eager_per_sample
from legacy_graph import per_sample as graph_per_sample
from pgtwin.mode_agnostic import distributions, forward_pass, loss, per_sample
from pgtwin_core.specs import PolicySpec

from tests import numpy_policy
from tests.per_sample_cases import KINDS, random_inputs, random_weights

tf1 = tf.compat.v1

SPECS = dict(KINDS)
SPECS["gaussian_unsquashed_mlp"] = PolicySpec("gaussian", (3,), 2, hidden=(5, 4), squash="none")
DTYPE = "float64"  # every test here computes in float64
MODES = ("graph", "eager")
# How each twin takes the backward pass at the pre-activations: the one part of the
# analytic per-sample gradients that is not shared.
LAYER_DELTAS = {"graph": graph_per_sample.layer_deltas, "eager": eager_per_sample.layer_deltas}
B = 5
RTOL = 1e-12
FD_RTOL, FD_ATOL = 1e-6, 1e-8  # central differences: ~eps^2 f''' / 6 + 1e-16 / eps

specs = pytest.mark.parametrize("kind", tuple(SPECS))
modes = pytest.mark.parametrize("mode", MODES)


def evaluate(mode: str, build):
    """``build()``'s tensors as numpy: built in a fresh TF1 graph and run by a Session
    (``graph``), or run eagerly (``eager``)."""
    if mode == "eager":
        return tf.nest.map_structure(lambda t: t.numpy(), build())
    with tf.Graph().as_default():
        fetches = build()
        with tf1.Session() as session:
            return session.run(fetches)


def case(kind: str, seed: int = 0):
    """``(spec, numpy weights, obs, actions)`` for ``kind``, B samples."""
    spec = SPECS[kind]
    obs, actions = random_inputs(spec, B, seed=seed, dtype=DTYPE)
    return spec, random_weights(spec, seed=seed, dtype=DTYPE), obs, actions


def constants(weights: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    return {name: tf.constant(value) for name, value in weights.items()}


@modes
@specs
def test_forward_pass_matches_numpy(kind, mode):
    spec, w, obs, _ = case(kind)
    got = evaluate(mode, lambda: forward_pass.dist_params(spec, constants(w), tf.constant(obs)))
    assert got.shape == (B, spec.num_params) and got.dtype == np.float64
    np.testing.assert_allclose(got, numpy_policy.dist_params(spec, w, obs), rtol=RTOL, atol=1e-14)


@specs
def test_the_traced_forward_pass_is_the_forward_pass(kind):
    """``traced_dist_params`` (what the analytic gradients differentiate) gives the very
    numbers of ``dist_params`` (what the loss uses), and one layer per dense weight pair."""
    spec, w, obs, _ = case(kind)
    plain = forward_pass.dist_params(spec, constants(w), tf.constant(obs))
    traced, layers = per_sample.traced_dist_params(spec, constants(w), tf.constant(obs))
    np.testing.assert_array_equal(traced.numpy(), plain.numpy())
    assert [layer.kernel for layer in layers] == [n for n in spec.weight_shapes() if n.endswith("kernel")]
    steps = spec.history if spec.torso == "lstm" else 1
    assert len(layers[0].pre_activations) == steps


@modes
@specs
def test_log_prob_and_entropy_match_numpy(kind, mode):
    spec, w, obs, actions = case(kind)
    params = numpy_policy.dist_params(spec, w, obs)
    got_logp, got_entropy = evaluate(mode, lambda: (
        distributions.log_prob(spec, tf.constant(params), tf.constant(actions)),
        distributions.entropy(spec, tf.constant(params))))
    np.testing.assert_allclose(got_logp, numpy_policy.log_prob(spec, params, actions), rtol=RTOL)
    np.testing.assert_allclose(got_entropy, numpy_policy.entropy(spec, params), rtol=RTOL)


@modes
def test_reinforce_loss_matches_numpy(mode):
    rng = np.random.default_rng(1)
    logp, adv, ent = (rng.standard_normal(B) for _ in range(3))
    weights = np.full(B, 1.0 / B)
    got = evaluate(mode, lambda: loss.reinforce_loss(*map(tf.constant, (logp, adv, weights, ent)),
                                                     0.01))
    assert got == pytest.approx(numpy_policy.reinforce_loss(logp, adv, weights, ent, 0.01),
                                rel=RTOL)


def test_reinforce_loss_gradient_matches_central_differences():
    """d loss / d log pi_i = -w_i A_i and d loss / d H_i = -c w_i, by ``tf.test.compute_gradient``.

    (That the data, ``A`` and ``w``, get no gradient at all is ``parity_tests/test_dead_gradients``.)
    """
    rng = np.random.default_rng(2)
    logp, adv, ent = (rng.standard_normal(B) for _ in range(3))
    weights = rng.uniform(0.1, 1.0, B)

    def f(log_probs, entropies):
        return loss.reinforce_loss(log_probs, tf.constant(adv), tf.constant(weights), entropies, 0.3)

    theoretical, numerical = tf.test.compute_gradient(f, [tf.constant(logp), tf.constant(ent)])
    for t, n, expected in zip(theoretical, numerical, (-weights * adv, -0.3 * weights)):
        np.testing.assert_allclose(t.ravel(), expected, rtol=RTOL)
        np.testing.assert_allclose(n.ravel(), expected, rtol=1e-6)


@modes
@specs
def test_per_sample_math_matches_central_differences(kind, mode):
    """From one backward pass at the pre-activations (each twin's own way of taking it), the
    shared math gives every sample's gradient, ``sum_i c_i g_i`` and ``||g_i||^2``, as
    numpy's central differences of each ``log pi(a_i|s_i)`` do."""
    spec, w, obs, actions = case(kind, seed=4)
    coefficients = np.random.default_rng(5).standard_normal(B)

    def build():
        traced = LAYER_DELTAS[mode](spec, constants(w), tf.constant(obs), tf.constant(actions))
        return (traced.log_probs, per_sample.gradients_from_deltas(spec, traced),
                per_sample.weighted_gradient(spec, traced, tf.constant(coefficients)),
                per_sample.ghost_sq_norms(traced))

    log_probs, grads, weighted, sq_norms = evaluate(mode, build)
    ref = numpy_policy.per_sample_gradients(spec, w, obs, actions)
    assert max(float(np.abs(g).max()) for g in ref.values()) > 1e-3  # not a check of zeros
    np.testing.assert_allclose(log_probs, numpy_policy.log_probs(spec, w, obs, actions), rtol=RTOL)
    for k, name in enumerate(spec.weight_shapes()):
        np.testing.assert_allclose(grads[k], ref[name], rtol=FD_RTOL, atol=FD_ATOL, err_msg=name)
        np.testing.assert_allclose(weighted[k], np.tensordot(coefficients, ref[name], axes=1),
                                   rtol=FD_RTOL, atol=FD_ATOL, err_msg=f"weighted {name}")
    flat = np.concatenate([g.reshape(B, -1) for g in ref.values()], axis=1)
    np.testing.assert_allclose(sq_norms, np.sum(flat ** 2, axis=1), rtol=FD_RTOL)


def test_a_method_not_in_methods_is_named():
    per_sample.check_method("analytic")
    with pytest.raises(ValueError, match=r"method='jacobian' is not one of \('loop', "):
        per_sample.check_method("jacobian")


@modes
@pytest.mark.parametrize("out", [2, per_sample.NARROW, per_sample.NARROW + 4])
def test_the_traced_dense_layer_and_its_gradients(mode, out):
    """``_traced_dense`` computes ``forward_pass.dense`` to the bit, and its gradients of
    ``L = sum(z * c)`` are the hand-derived ``dL/dx = c W^T``, ``dL/dW = x^T c`` and
    ``dL/db = sum_i c_i``, for a narrow layer (broadcast products) and a wide one (the
    ordinary product)."""
    rng = np.random.default_rng(out)
    x, kernel, bias = rng.normal(size=(B, 7)), rng.normal(size=(7, out)), rng.normal(size=out)
    c = rng.normal(size=(B, out))

    def build():
        xs, ks, bs = tf.constant(x), tf.constant(kernel), tf.constant(bias)
        if mode == "eager":
            with tf.GradientTape() as tape:
                tape.watch([xs, ks, bs])
                z = per_sample._traced_dense(xs, ks, bs)  # noqa: SLF001
                total = tf.reduce_sum(z * c)
            grads = tape.gradient(total, [xs, ks, bs])
        else:
            z = per_sample._traced_dense(xs, ks, bs)  # noqa: SLF001
            grads = tf.gradients(tf.reduce_sum(z * c), [xs, ks, bs])
        return z, forward_pass.dense(xs, ks, bs), grads

    z, plain, (dx, dk, db) = evaluate(mode, build)
    np.testing.assert_array_equal(z, plain)
    np.testing.assert_allclose(dx, c @ kernel.T, rtol=RTOL)
    np.testing.assert_allclose(dk, x.T @ c, rtol=RTOL)
    np.testing.assert_allclose(db, c.sum(axis=0), rtol=RTOL)
