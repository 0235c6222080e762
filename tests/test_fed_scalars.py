"""Scalars TF1's loop feeds to its train step: a coefficient the TF2 train step keeps as a
constant parts once halved at step 2 (pgtwin.parity.fed_scalars; a fed learning rate's
case is in test_code_parity and test_fed_gradients), and convert-checkpoint says no
checkpoint holds a fed learning rate (migrate.user_checkpoint)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.migrate.user_checkpoint import convert_user_checkpoint
from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class Annealed:
    """PPO2's shape, cut down: a linear policy, Adam on a fed LR placeholder."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.LR = tf1.placeholder(tf.float32, [], name="LR")
        logits = self.obs @ tf1.get_variable("pi/w", [3, 2])
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.act, logits=logits))
        self.train_op = tf1.train.AdamOptimizer(self.LR).minimize(self.loss)


def test_a_fed_rate_is_said_to_be_in_no_checkpoint_not_a_rate_that_differs(tmp_path):
    rng = np.random.default_rng(13)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8),
             "lr": np.float64(0.01)}
    with tf.Graph().as_default():
        agent = Annealed()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for rate in (0.01, 0.005):  # the loop anneals it
                sess.run(agent.train_op, {agent.obs: batch["obs"], agent.act: batch["act"],
                                          agent.LR: rate})
            src = tf1.train.Saver().save(sess, str(tmp_path / "tf1" / "model"))
    dense = keras.layers.Dense(2, use_bias=False, name="pi")

    class Port(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = keras.Sequential([keras.Input((3,)), dense])
            self.optimizer = keras.optimizers.Adam(3e-4, epsilon=1e-8)

    def loss(agent, b):
        logits = agent.model(tf.cast(b["obs"], tf.float32))
        return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits))}
    result = convert_user_checkpoint(
        src, str(tmp_path / "tf2" / "ckpt"),
        TF1Program(build=Annealed, loss="loss", train_op="train_op",
                   feeds={"obs": "obs", "act": "act", "lr": "LR"}),
        TF2Program(build=Port, loss=loss, model="model", optimizer="optimizer"), batch)
    [rate] = [r for r in result.report.rows if r.item == "optimizer.learning_rate"]
    assert rate.ok and rate.note.startswith(
        "TF1's learning rate is the placeholder its loop feeds (inputs['lr']: 0.01 in this "
        "batch), which no checkpoint holds; the Keras optimizer was written with 0.0003"), \
        rate.note
    assert result.iterations == 2


class Bonus:
    """A policy-gradient loss less a fed entropy coefficient x the entropy; SGD."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.coef = tf1.placeholder(tf.float32, [], name="ent_coef")
        logits = self.obs @ tf1.get_variable("pi/w", [3, 2])
        p = tf.nn.softmax(logits)
        entropy = -tf.reduce_mean(tf.reduce_sum(p * tf.math.log(p), 1))
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.act, logits=logits)) - self.coef * entropy
        self.train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(self.loss)


@pytest.mark.parametrize("step_reads_it", [True, False])
def test_a_coefficient_the_train_step_keeps_as_a_constant_parts_at_step_2(step_reads_it):
    # the port's loss reads batch["ent_coef"], its train step a constant equal to the
    # batch's 0.3: every rung and step 1 agreed (a helper's A2C port); halved from step 2
    dense = keras.layers.Dense(2, use_bias=False, name="pi")
    optimizer = keras.optimizers.SGD(0.5)

    def loss(agent, b, coef=None):
        logits = agent(tf.cast(b["obs"], tf.float32))
        p = tf.nn.softmax(logits)
        entropy = -tf.reduce_mean(tf.reduce_sum(p * tf.math.log(p), 1))
        coef = tf.cast(b["ent_coef"], tf.float32) if coef is None else coef
        return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)) - coef * entropy}

    def step(agent, b):
        with tf.GradientTape() as tape:
            value = loss(agent, b, None if step_reads_it else 0.3)["loss"]
        optimizer.apply_gradients(zip(tape.gradient(value, agent.trainable_variables),
                                      agent.trainable_variables))
    rng = np.random.default_rng(21)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8),
             "ent_coef": np.float64(0.3)}
    report = compare_programs(
        TF1Program(build=Bonus, loss="loss", train_op="train_op", feeds={k: k for k in batch}),
        TF2Program(build=lambda: dense, loss=loss, train_step=step), batch, steps=2)
    assert any(r.item == "fed scalars" for r in report.rows), report.to_table()
    if step_reads_it:
        assert report.ok, report.to_table()
        return
    bad = report.first_failure
    assert "step 2/2" in bad.context and bad.note.startswith(
        "from this step the scalars TF1's train_op reads moved (inputs['ent_coef'] 0.3 -> "
        "0.15) on both sides"), report.to_table()
    assert "the TF2 train step does not take inputs['ent_coef']" in bad.note

