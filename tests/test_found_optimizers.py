"""Which Keras optimizers compare finds on the TF2 side, and when.

A TF2 port may make its optimizer in its first train step (``self.optimizer = None`` in
``__init__``), keep it in a dict, or, wrongly, make a new one on every step; the settings
rows and the weights' notes must see it as they see one made in ``__init__``. The TF1 side
is tests/user_programs.py's policy (AdamOptimizer, lr 0.01, epsilon 1e-8).
"""
from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from tests import user_programs as up

BATCH = up.make_batch()


class LazyAgent(up.KerasAgent):
    """The migration with its optimizer made in the first train step (``epsilon``), or in
    every one (``every_step``), held as ``self.optimizer`` or in ``self.optimizers``."""

    def __init__(self, epsilon=1e-8, every_step=False, in_dict=False):
        super().__init__()
        self.optimizer = None
        self.epsilon, self.every_step, self.in_dict = epsilon, every_step, in_dict
        self.optimizers = {}

    def train_step(self, obs, actions, returns):
        if self.optimizer is None or self.every_step:
            self.optimizer = keras.optimizers.Adam(up.LR, epsilon=self.epsilon)
        if self.in_dict:
            self.optimizers["pi"], optimizer, self.optimizer = self.optimizer, self.optimizer, \
                None if self.every_step else self.optimizer
        super().train_step(obs, actions, returns)


def lazy_program(**options) -> "up.TF2Program":
    return dataclasses.replace(up.tf2_program(), build=lambda: LazyAgent(**options))


def test_an_optimizer_made_in_the_first_train_step_is_compared_like_one_made_before():
    report = compare_programs(up.tf1_program(), lazy_program(), BATCH, steps=3)
    assert report.ok, report.to_table()
    items = [r.item for r in report.rows if r.rung == "weights"]
    assert "optimizer.epsilon" in items and "optimizer.learning_rate" in items
    assert sum(i.endswith("train step's gradient") for i in items) == 4


@pytest.mark.parametrize("options", [{}, {"in_dict": True}], ids=["attribute", "dict"])
def test_a_lazily_made_optimizers_default_epsilon_is_named(options):
    report = compare_programs(up.tf1_program(), lazy_program(epsilon=1e-7, **options), BATCH,
                              steps=1)
    assert report.first_failure.item == "optimizer.epsilon", report.to_table()
    assert "write epsilon=1e-8" in report.first_failure.note


def test_a_lazy_optimizer_named_before_it_exists_is_read_after_the_first_step():
    program = dataclasses.replace(lazy_program(), optimizer="optimizer")
    report = compare_programs(up.tf1_program(), program, BATCH, steps=2)
    assert report.ok, report.to_table()
    assert any(r.item == "optimizer.epsilon" for r in report.rows)


def test_a_new_optimizer_made_on_every_step_is_named_as_the_cause():
    # Each new Adam starts from m = v = 0 and t = 1: its second step is another first step,
    # lr * sign(g) in size, where TF1's second step is not.
    report = compare_programs(up.tf1_program(), lazy_program(every_step=True), BATCH, steps=3)
    first = report.first_failure
    assert first.rung == "weights" and "step 2/3" in first.context, report.to_table()
    assert first.note.startswith("the TF2 train step made a new Keras optimizer (Adam) at step "
                                 "2: its state (Adam's moments, iterations) starts again")


def test_an_optimizer_reference_to_something_else_is_refused_naming_it():
    program = dataclasses.replace(up.tf2_program(), optimizer="model")
    with pytest.raises(ValueError, match=r"TF2Program.optimizer='model' is a Sequential, not a "
                                         r"Keras optimizer"):
        compare_programs(up.tf1_program(), program, BATCH, steps=1)


def test_a_trainable_target_no_step_updates_passes_with_one_keras_optimizer():
    # A DQN whose target network is trainable but left out of minimize(var_list=online):
    # neither side steps it, and the one Keras optimizer holds only the online weights.
    tf1 = tf.compat.v1

    class TF1Q:
        def __init__(self):
            self.obs = tf1.placeholder(tf.float32, [None, 3], "obs")
            self.y = tf1.placeholder(tf.float32, [None], "y")

            def net(scope):
                with tf1.variable_scope(scope):
                    return tf.squeeze(self.obs @ tf1.get_variable("w", [3, 1]), 1)
            self.q, q_next = net("online"), net("target")
            self.loss = tf.reduce_mean(tf.square(tf.stop_gradient(self.y + 0.9 * q_next)
                                                 - self.q))
            self.train_op = tf1.train.AdamOptimizer(0.01).minimize(
                self.loss, var_list=tf1.trainable_variables("online"))

    class KerasQ:
        def __init__(self):
            def net(name):
                return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)],
                                        name=name)
            self.online, self.target = net("online"), net("target")
            self.optimizer = keras.optimizers.Adam(0.01, epsilon=1e-8)

        def loss(self, b):
            q = tf.squeeze(self.online(b["obs"]), 1)
            target = b["y"] + 0.9 * tf.squeeze(self.target(b["obs"]), 1)
            return {"loss": tf.reduce_mean(tf.square(tf.stop_gradient(target) - q))}

        def train_step(self, b):
            with tf.GradientTape() as tape:
                loss = self.loss(b)["loss"]
            weights = self.online.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))

    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(8, 3)), "y": rng.normal(size=8)}
    report = compare_programs(
        up.TF1Program(build=TF1Q, feeds={"obs": "obs", "y": "y"}, loss="loss",
                      train_op="train_op"),
        up.TF2Program(build=KerasQ, loss=lambda a, b: a.loss(b),
                      train_step=lambda a, b: a.train_step(b)), batch, steps=2)
    assert report.ok, report.to_table()
    notes = [r.note for r in report.rows if r.item == "target/w: optimizer"]
    assert notes == ["neither side's step updates these variables (no apply op of TF1's "
                     "train_op, no Keras optimizer holds them): compared through the weights"]
