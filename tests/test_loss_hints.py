"""The loss rung's term hint and the outputs rung's constant offset
(pgtwin.parity.loss_hints, pgtwin.parity.parity_rows), against gaps made by hand."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.loss_hints import loss_terms, term_hint
from pgtwin.parity.parity_rows import output_rows

tf1 = tf.compat.v1


def _actor_critic(dtype):
    """A TF1 loss pg + 0.5 vf - 0.01 ent over three scalar terms, its Session and feed:
    pg = 1.5, vf = 4.0, ent = 0.7 (fed), so the loss is 1.5 + 2.0 - 0.007 = 3.493."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf1.placeholder(dtype, [3], name="terms")
        pg, vf, ent = (tf.identity(x[i], name=n) for i, n in enumerate(("pg", "vf", "ent")))
        loss = pg + 0.5 * vf - 0.01 * ent
    session = tf1.Session(graph=graph)
    return SimpleNamespace(loss=loss, session=session, feed={x: np.array([1.5, 4.0, 0.7])})


@pytest.fixture(scope="module")
def actor_critic():
    program = _actor_critic(tf.float64)
    yield program
    program.session.close()


def test_the_loss_is_read_as_its_terms_with_their_coefficients(actor_critic):
    got = [(c, t.op.name) for c, t in loss_terms(actor_critic.loss)]
    assert got == [(1.0, "pg"), (0.5, "vf"), (-0.01, "ent")]


@pytest.mark.parametrize("tf2_loss,want", [
    # the value loss weighted 1.0: 1.5 + 4.0 - 0.007 = 5.493
    (5.493, "the TF2 loss weights TF1's term vf (4) 1 where TF1 weights it 0.5: counted "
            "twice, or its coefficient doubled"),
    # the entropy bonus left out: 3.5
    (3.5, "the TF2 loss weights TF1's term ent (0.7) 0 where TF1 weights it -0.01: a term "
          "left out of the TF2 loss"),
    # the value loss weighted 0.25: 1.5 + 1.0 - 0.007 = 2.493
    (2.493, "the TF2 loss weights TF1's term vf (4) 0.25 where TF1 weights it 0.5: a "
            "coefficient differs"),
    # a gap no one term explains with a round coefficient (3.493 + 0.1234567)
    (3.6164567, ""),
])
def test_a_gap_one_terms_coefficient_explains_is_named(actor_critic, tf2_loss, want):
    assert term_hint(actor_critic, 3.493, tf2_loss, 1e-9) == want


def test_a_flipped_sign_is_named_in_float32_too():
    # 0.01 in float32 reads back as 0.009999999776; the entropy bonus added where TF1
    # subtracts it: 1.5 + 2.0 + 0.007 = 3.507
    program = _actor_critic(tf.float32)
    try:
        assert term_hint(program, 3.493, 3.507, 1e-6) == (
            "the TF2 loss weights TF1's term ent (0.7) 0.01 where TF1 weights it -0.01: its "
            "sign flipped")
    finally:
        program.session.close()


def test_an_output_a_constant_apart_is_named_with_the_gaussian_constant():
    # a hand-written Gaussian log-prob without -0.5 log(2 pi) per dimension (2 dimensions)
    rng = np.random.default_rng(0)
    logp = rng.normal(size=16)
    [row] = output_rows({"logp": logp}, {"logp": logp + np.log(2 * np.pi)}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert not row.ok and row.note == (
        "TF2Program's 'logp' is TF1Program's + 1.838, all of it: a constant term on one side "
        "only (1.838 is 2 x 0.5 log(2 pi), the Gaussian log-density's constant per action "
        "dimension)")
    [minus] = output_rows({"logp": logp}, {"logp": logp - 0.5 * np.log(2 * np.pi)}, 1e-5,
                          1e-6, "", sides=("TF1Program", "TF2Program"))
    assert minus.note.startswith("TF2Program's 'logp' is TF1Program's - 0.9189, all of it: a "
                                 "constant term on one side only (0.9189 is 1 x 0.5 log(2 pi)")


def test_the_tensors_a_train_op_minimises_are_read_under_any_scope():
    from pgtwin.parity.loss_hints import minimised_tensors
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        w = tf1.get_variable("w", [3])
        with tf1.name_scope("losses"):
            pg = tf.reduce_sum(tf.square(w))
            loss = pg - 0.1 * tf.reduce_sum(w)
        with tf1.name_scope("train"):
            train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        assert [t.name for t in minimised_tensors(train_op)] == [loss.name]
        assert minimised_tensors(None) == []
