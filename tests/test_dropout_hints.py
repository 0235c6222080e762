"""Dropout in the harness: what a report says when dropout is left on, or given the wrong
number, so that the first failure names the cause and the later rungs do not blame
something else (a stop_gradient, the wrong var_list).

The TF1 side is old code's dropout: ``tf.nn.dropout(h, keep_prob=keep_prob_ph)`` with the
keep probability fed. The TF2 side is a Keras ``Dropout(rate)`` called with
``training=True`` in the loss and train step.
"""
from __future__ import annotations

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1
OBS, HIDDEN, ACTIONS, LR = 4, 16, 3, 0.05


class DropoutPolicy:
    """Old TF1 code with a keep_prob placeholder on its hidden layer."""

    def __init__(self):
        self.obs_ph = tf1.placeholder(tf.float32, [None, OBS], name="obs")
        self.act_ph = tf1.placeholder(tf.int32, [None], name="actions")
        self.ret_ph = tf1.placeholder(tf.float32, [None], name="returns")
        self.keep_prob = tf1.placeholder(tf.float32, [], name="keep_prob")
        glorot, zeros = tf1.glorot_uniform_initializer(), tf1.zeros_initializer()
        with tf1.variable_scope("policy"):
            w1 = tf1.get_variable("fc1/weights", [OBS, HIDDEN], initializer=glorot)
            b1 = tf1.get_variable("fc1/biases", [HIDDEN], initializer=zeros)
            w2 = tf1.get_variable("out/weights", [HIDDEN, ACTIONS], initializer=glorot)
            b2 = tf1.get_variable("out/biases", [ACTIONS], initializer=zeros)
        hidden = tf1.nn.dropout(tf.tanh(self.obs_ph @ w1 + b1), keep_prob=self.keep_prob)
        self.logits = hidden @ w2 + b2
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act_ph,
                                                                 logits=self.logits)
        self.loss = tf.reduce_mean(neglogp * self.ret_ph)
        self.train_op = tf1.train.GradientDescentOptimizer(LR).minimize(self.loss)


class KerasDropoutAgent:
    def __init__(self, rate, loss_training=True):
        self.loss_training = loss_training  # False: only the train step drops
        self.model = keras.Sequential([keras.layers.Dense(HIDDEN, activation="tanh"),
                                       keras.layers.Dropout(rate), keras.layers.Dense(ACTIONS)])
        self.optimizer = keras.optimizers.SGD(LR)

    def loss(self, b, training=None):
        training = self.loss_training if training is None else training
        logits = self.model(b["obs"], training=training)
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["actions"],
                                                                 logits=logits)
        return {"loss": tf.reduce_mean(neglogp * b["returns"]), "logits": logits}

    def train_step(self, b):
        with tf.GradientTape() as tape:
            loss = self.loss(b, training=True)["loss"]
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None])


def tf1_program() -> TF1Program:
    return TF1Program(build=DropoutPolicy, loss="loss", outputs={"logits": "logits"},
                      train_op="train_op",
                      feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph",
                             "keep_prob": "keep_prob"})


def tf2_program(rate: float, loss_training: bool = True) -> TF2Program:
    return TF2Program(build=lambda: KerasDropoutAgent(rate, loss_training), loss=lambda a, b: a.loss(b),
                      train_step=lambda a, b: a.train_step(b), model="model")


def batch(keep_prob: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"obs": rng.normal(size=(32, OBS)), "actions": rng.integers(0, ACTIONS, 32),
            "returns": rng.normal(size=32), "keep_prob": np.float32(keep_prob)}


@pytest.fixture(autouse=True)
def _seeded_keras():
    keras.utils.set_random_seed(0)


def test_dropout_left_on_is_named_as_randomness_at_the_first_failure():
    # keep_prob 0.8 fed to TF1 and rate 0.2 in Keras: the same dropout, drawing other masks
    report = compare_programs(tf1_program(), tf2_program(0.2), batch(0.8), steps=1)
    first = report.first_failure
    assert (first.rung, first.item) == ("outputs", "logits"), report.to_table()
    assert "TF1Program (" in first.note and "TF2Program (" in first.note
    assert "gave other values when run again on the same inputs and weights: the forward " \
           "pass is random (dropout on" in first.note


def test_dropout_at_its_off_setting_passes():
    # keep_prob 1.0 and rate 0.0: the dropout layers pass everything, both sides agree
    report = compare_programs(tf1_program(), tf2_program(0.0), batch(1.0), steps=2)
    assert report.ok, report.to_table()


def test_keep_prob_given_as_the_rate_is_named_and_the_later_rungs_follow_from_it():
    # Dropout(rate=1.0) where TF1 keeps everything (keep_prob 1.0): the Keras hidden layer
    # gives zeros, so every logits row is the head's bias, and the hidden layer's gradient
    # is None (nothing of it reaches the loss).
    report = compare_programs(tf1_program(), tf2_program(1.0), batch(1.0), steps=1)
    first = report.first_failure
    assert (first.rung, first.item) == ("outputs", "logits"), report.to_table()
    assert first.note.startswith("every row of TF2Program's 'logits' is the same, "
                                 "TF1Program's are not")
    hidden = [r for r in report.rows if r.item.startswith("policy/fc1/weights")]
    gradient, weights = (next(r for r in hidden if r.rung == rung)
                         for rung in ("gradients", "weights"))
    assert "a Dropout given keep_prob as its rate" in gradient.note
    assert weights.note.startswith("its TF2 gradient is None (the gradients rung)")


def test_dropout_only_the_train_step_draws_is_named_at_the_weights():
    # The loss calls the model in inference mode, so every rung up to the gradients agrees;
    # the train step calls it with training=True and drops a fifth of the hidden units,
    # which TF1's train_op (keep_prob 1.0) does not.
    report = compare_programs(tf1_program(), tf2_program(0.2, loss_training=False), batch(1.0),
                              steps=1)
    first = report.first_failure
    assert first.rung == "weights" and first.item.startswith("policy/"), report.to_table()
    assert re.match(r"the Keras model holds dropout(_\d+)? \(rate 0.2\): a train step that "
                    "calls it with training=True draws dropout masks", first.note), first.note
    off = compare_programs(tf1_program(), tf2_program(0.0, loss_training=False), batch(1.0),
                           steps=1)
    assert off.ok, off.to_table()


class SamplingPolicy:
    """Old TF1 code whose loss reads the action it samples in the graph, which its training
    loop feeds (``feed_dict={policy.sample: actions}``)."""

    def __init__(self):
        tf1.set_random_seed(0)  # op determinism may be on in this process
        self.obs_ph = tf1.placeholder(tf.float32, [None, OBS], name="obs")
        self.ret_ph = tf1.placeholder(tf.float32, [None], name="returns")
        w = tf1.get_variable("policy/weights", [OBS, ACTIONS])
        self.logits = self.obs_ph @ w
        self.sample = tf.squeeze(tf.random.categorical(self.logits, 1), 1, name="sampled_action")
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.sample,
                                                                 logits=self.logits)
        self.loss = tf.reduce_mean(neglogp * self.ret_ph)


def test_a_sample_the_tf1_loss_reads_unfed_is_named_with_the_feed_that_fixes_it():
    # The description left out the feed of the sampled action: both sides sample anew on
    # every run, and the note names TF1's sample tensor and how to feed it.
    def loss(model, b):
        logits = model(b["obs"])
        actions = tf.squeeze(tf.random.categorical(logits, 1), 1)
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
        return {"loss": tf.reduce_mean(neglogp * b["returns"])}

    tf1_program = TF1Program(build=SamplingPolicy, feeds={"obs": "obs_ph", "returns": "ret_ph"},
                             loss="loss")
    tf2_program = TF2Program(build=lambda: keras.Sequential(
        [keras.layers.Dense(ACTIONS, use_bias=False)]), loss=loss)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(64, OBS)), "returns": rng.normal(size=64)}
    report = compare_programs(tf1_program, tf2_program, batch, steps=0)
    bad = report.first_failure
    assert bad is not None and bad.rung == "loss", report.to_table()
    assert ("TF1's loss reads the sample sampled_action:0 (drawn in the graph, fed by "
            "nothing): feed it the batch's actions or noise as the training loop does (a feed "
            "may replace any tensor: TF1Program.feeds={..., 'KEY': 'sampled_action:0'})"
            in bad.note), bad.note


def test_a_setting_that_explains_the_steps_comes_before_a_dropout_guess():
    # the train step runs in inference mode (no masks), with SGD momentum 0.9 where TF1's
    # step is plain: the momentum explains the steps; the dropout layer in the model was
    # named first all the same (a guess: the note cannot see how the step calls it)
    class Momentum(KerasDropoutAgent):
        def __init__(self):
            super().__init__(0.2, loss_training=False)
            self.optimizer = keras.optimizers.SGD(LR, momentum=0.9)

        def train_step(self, b):
            with tf.GradientTape() as tape:
                loss = self.loss(b, training=False)["loss"]
            variables = self.model.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    program = TF2Program(build=Momentum, loss=lambda a, b: a.loss(b),
                         train_step=lambda a, b: a.train_step(b), model="model")
    report = compare_programs(tf1_program(), program, batch(1.0), steps=2)
    first = report.first_failure
    assert first.item == "optimizer.momentum", report.to_table()
    parted = [r for r in report.rows if r.rung == "weights" and not r.ok
              and r.item.startswith("policy/")]
    assert parted and not any("holds dropout" in r.note for r in parted), report.to_table()
