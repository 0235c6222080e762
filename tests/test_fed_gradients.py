"""TF1 code that trains through gradient placeholders (the gradient-buffer loop of the 2016-2017
tutorials), compared as it is: the harness feeds each holder the loss's gradient
(``pgtwin/parity/fed_gradients.py``)."""
from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.fed_gradients import GradientFeedError, fed_gradients
from pgtwin.parity.programs import TF1Program
from pgtwin.parity.tf1_side import FeedError
from tests import user_programs as up

tf1 = tf.compat.v1
BATCH = up.make_batch()


@pytest.fixture(autouse=True)
def _seeded_keras():
    keras.utils.set_random_seed(0)  # as tests/test_code_parity.py: one fixed Keras draw


class GradientBuffer:
    """Old tutorial code: ``self.gradients`` run per episode and summed in numpy, then
    ``update_batch`` fed the sums through one unshaped placeholder per variable. The
    variables are ``user_programs.PolicyGradient``'s policy, so ``KerasAgent`` ports it."""

    def __init__(self, dtype=tf.float32, clip_norm=None, rate_placeholder=False):
        self.obs_ph = tf1.placeholder(dtype, [None, up.OBS], name="obs")
        self.act_ph = tf1.placeholder(tf.int32, [None], name="actions")
        self.ret_ph = tf1.placeholder(dtype, [None], name="returns")
        init = tf1.glorot_uniform_initializer()
        w1 = tf1.get_variable("w1", [up.OBS, up.HIDDEN], dtype, init)
        b1 = tf1.get_variable("b1", [up.HIDDEN], dtype, tf1.zeros_initializer())
        w2 = tf1.get_variable("w2", [up.HIDDEN, up.ACTIONS], dtype, init)
        b2 = tf1.get_variable("b2", [up.ACTIONS], dtype, tf1.zeros_initializer())
        self.logits = tf.matmul(tf.tanh(tf.matmul(self.obs_ph, w1) + b1), w2) + b2
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act_ph,
                                                                 logits=self.logits)
        self.loss = tf.reduce_mean(neglogp * self.ret_ph)
        tvars = tf1.trainable_variables()
        self.gradients = tf.gradients(self.loss, tvars)
        self.gradient_holders = [tf1.placeholder(dtype, name=f"{i}_holder")
                                 for i in range(len(tvars))]
        applied = self.gradient_holders
        if clip_norm is not None:
            applied, _ = tf.clip_by_global_norm(applied, clip_norm)
        self.lr_ph = tf1.placeholder(dtype, [], name="lr") if rate_placeholder else None
        optimizer = tf1.train.AdamOptimizer(up.LR if self.lr_ph is None else self.lr_ph)
        self.update_batch = optimizer.apply_gradients(zip(applied, tvars))


FEEDS = {"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"}


def gradient_buffer(dtype: str = "float32", **options) -> TF1Program:
    return TF1Program(build=lambda: GradientBuffer(tf.as_dtype(dtype), **options), feeds=FEEDS,
                      loss="loss", outputs={"logits": "logits"}, train_op="update_batch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_gradient_buffer_train_op_is_fed_the_losss_gradients_at_each_steps_weights(dtype):
    """Passes against the faithful port only if each step applied d loss / d w at that
    step's weights: a holder fed once (or zeros) would part from Keras' steps at step 2."""
    report = compare_programs(gradient_buffer(dtype), up.tf2_program(dtype), BATCH, steps=3)
    assert report.ok, report.to_table()
    (note,) = [r.note for r in report.rows if r.item == "train step"]
    assert "gradient-buffer loop" in note
    for i, name in enumerate(("w1", "b1", "w2", "b2")):
        assert f"'{i}_holder' <- d loss / d {name}" in note
    assert "step 3/3" in report.rows[-1].context


def test_a_wrong_port_of_a_gradient_buffer_is_still_caught():
    report = compare_programs(gradient_buffer(), up.tf2_program(reduce=tf.reduce_sum), BATCH)
    assert not report.ok
    assert any(r.rung == "loss" and not r.ok for r in report.rows), report.to_table()


def test_holders_clipped_by_their_global_norm_are_fed_and_the_clipping_compared():
    """Clip norm 0.05 is under the batch's gradient norm, so the clip acts: Keras'
    ``global_clipnorm`` at the same norm passes, no clipping fails."""
    tf1_side = gradient_buffer(clip_norm=0.05)
    clipped = up.tf2_program(optimizer=keras.optimizers.Adam(up.LR, epsilon=1e-8,
                                                             global_clipnorm=0.05))
    report = compare_programs(tf1_side, clipped, BATCH)
    assert report.ok, report.to_table()
    assert not compare_programs(tf1_side, up.tf2_program(), BATCH).ok


def test_each_holder_is_paired_with_its_own_variable_through_a_global_norm_clip():
    """Two variables of one shape, created in the opposite order to their holders: only
    the holder on the gradient's own path (not the clipping's scalar) is that variable's."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        a = tf1.get_variable("a", [2, 2])
        b = tf1.get_variable("b", [2, 2])
        hb = tf1.placeholder(tf.float32, [2, 2], name="hb")
        ha = tf1.placeholder(tf.float32, [2, 2], name="ha")
        (ca, cb), _ = tf.clip_by_global_norm([ha, hb], 1.0)
        op = tf1.train.GradientDescentOptimizer(0.1).apply_gradients([(cb, b), (ca, a)])
    found = {h.op.name: v.name for h, v in fed_gradients(op, {}, "TF1Program").items()}
    assert found == {"ha": "a", "hb": "b"}


def test_a_fed_gradient_with_a_weight_decay_term_is_still_fed():
    """``holder + 1e-4 * w`` reads a variable, not a gradient op: still a fed gradient."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        w = tf1.get_variable("w", [2, 2])
        h = tf1.placeholder(tf.float32, name="h")
        op = tf1.train.GradientDescentOptimizer(0.1).apply_gradients([(h + 1e-4 * w, w)])
    found = {k.op.name: v.name for k, v in fed_gradients(op, {}, "TF1Program").items()}
    assert found == {"h": "w"}


def test_a_gradient_computed_in_the_graph_is_not_taken_for_a_fed_one():
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf1.placeholder(tf.float32, [None, 2], name="x")
        w = tf1.get_variable("w", [2, 2])
        op = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(x @ w))
    assert fed_gradients(op, {"x": x}, "TF1Program") == {}


def test_a_gradient_holder_named_in_feeds_is_refused_with_the_fix():
    """Fed from the inputs, a holder's array is applied unchanged at every step."""
    program = dataclasses.replace(gradient_buffer(), feeds={**FEEDS, "g0": "0_holder",
                                                            "g2": "2_holder"})
    batch = {**BATCH, "g0": np.zeros((up.OBS, up.HIDDEN)), "g2": np.zeros((up.HIDDEN,
                                                                           up.ACTIONS))}
    with pytest.raises(GradientFeedError) as err:
        compare_programs(program, up.tf2_program(), batch)
    text = str(err.value)
    assert text.startswith("TF1Program.feeds['g0'] ('0_holder', the gradient of w1), "
                           "feeds['g2'] ('2_holder', the gradient of w2) name placeholders")
    assert "applied unchanged at every step" in text and "Leave them out of feeds" in text


def test_a_placeholder_only_the_train_op_reads_is_named_before_any_step():
    """A learning rate fed by the training loop: refused at set-up (exit 2 in the CLI), not
    as a failing train step; fed, it is compared."""
    program = gradient_buffer(rate_placeholder=True)
    # named by the attribute that holds it too, which feeds can name it by (a helper's
    # message named only 'Placeholder_5', where the object held it as LR)
    with pytest.raises(FeedError, match=r"the TF1 train_op needs placeholders \['lr'\] \(held "
                                        r"as lr_ph\) that the loss does not .* add "
                                        r"feeds=\{\.\.\., 'KEY': 'lr_ph'\}"):
        compare_programs(program, up.tf2_program(), BATCH)
    fed = dataclasses.replace(program, feeds={**FEEDS, "lr": "lr_ph"})
    batch = {**BATCH, "lr": np.float64(up.LR)}
    # a port whose Adam holds the same rate and never reads the input parts once the
    # harness halves it at step 2; one that sets its rate from the batch passes
    fixed = compare_programs(fed, up.tf2_program(), batch)
    assert "does not take inputs['lr']" in fixed.first_failure.note, fixed.to_table()

    def takes_rate(agent, b):
        agent.optimizer.learning_rate.assign(tf.cast(b["lr"], tf.float32))
        agent.train_step(b["obs"], b["actions"], b["returns"])
    report = compare_programs(fed, dataclasses.replace(up.tf2_program(),
                                                       train_step=takes_rate), batch)
    assert report.ok, report.to_table()
