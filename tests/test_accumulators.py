"""Gradient accumulation in variables (zero, assign_add per minibatch, apply once): a
train_op that applies accumulators it does not fill is refused with the description that
compares it (pgtwin.parity.accumulators)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class Accumulating:
    """A linear softmax policy, SGD; accumulators, zero_ops, accum_ops, apply_op (acc / 4),
    and ``chain``: zero, then accumulate 4 times, then apply, in that order."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        w = tf1.get_variable("pi/w", [3, 2])
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.act, logits=self.obs @ w))
        self.optimizer = tf1.train.GradientDescentOptimizer(0.5)
        self.acc = tf.Variable(tf.zeros_like(w), trainable=False)
        self.zero_ops = self.acc.assign(tf.zeros_like(w))
        [(g, _)] = self.optimizer.compute_gradients(self.loss, [w])
        self.accum_ops = self.acc.assign_add(g)
        self.apply_op = self.optimizer.apply_gradients([(self.acc / 4.0, w)])
        with tf.control_dependencies([self.zero_ops]):  # the loop's order, on one batch
            added = tf.identity(self.acc)
        for _ in range(4):
            with tf.control_dependencies([added]):
                added = self.acc.assign_add(g)
        with tf.control_dependencies([added]):
            self.chain = self.optimizer.apply_gradients([(self.acc / 4.0, w)])


def _compare(train_op):
    dense = keras.layers.Dense(2, use_bias=False, name="pi")
    optimizer = keras.optimizers.SGD(0.5)

    def loss(agent, b):
        return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=agent(tf.cast(b["obs"], tf.float32))))}

    def step(agent, b):
        with tf.GradientTape() as tape:
            value = loss(agent, b)["loss"]
        optimizer.apply_gradients(zip(tape.gradient(value, agent.trainable_variables),
                                      agent.trainable_variables))
    rng = np.random.default_rng(16)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8)}
    return compare_programs(
        TF1Program(build=Accumulating, loss="loss", train_op=train_op,
                   feeds={"obs": "obs", "act": "act"}),
        TF2Program(build=lambda: dense, loss=loss, train_step=step, optimizer=lambda a: optimizer),
        batch, steps=2)


@pytest.mark.parametrize("train_op", ["apply_op", ["zero_ops", "accum_ops", "apply_op"]])
def test_an_apply_op_of_accumulators_no_earlier_op_fills_is_refused(train_op):
    # alone it applies zeros; grouped with the adds, it runs before or after them as TF1
    # pleases. Before: the weights rows said the TF2 step moved variables TF1 keeps fixed
    with pytest.raises(ValueError, match=r"TF1Program.train_op applies gradients read from "
                                         r"accumulator variables \(Variable for pi/w\) that no "
                                         r"op before it fills .* train_op=lambda agent: "):
        _compare(train_op)


def test_a_train_op_that_zeroes_accumulates_and_applies_in_order_compares():
    # 4 adds of the whole batch's mean gradient, / 4: the step on the whole batch
    report = _compare("chain")
    assert report.ok, report.to_table()


@pytest.mark.parametrize("train_op", [lambda agent: None, lambda agent: agent.update])
def test_a_train_step_made_in_python_is_told_to_compare_without_steps_or_wrap_it(train_op):
    # TRPO's update runs sess.run itself: a function that runs it returns None, and a bound
    # method is no op; the message said only "not an op of the TF1 graph"
    class Procedure(Accumulating):
        def update(self):
            """A step made in Python (never run here)."""

    rng = np.random.default_rng(16)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8)}
    dense = keras.layers.Dense(2, use_bias=False, name="pi")
    with pytest.raises(TypeError, match=r"not an op of the TF1 graph: .* A train step your "
                                        r"code makes in Python, running sess.run itself .* "
                                        r"steps=0 \(--steps 0\)"):
        compare_programs(TF1Program(build=Procedure, loss="loss", train_op=train_op,
                                    feeds={"obs": "obs", "act": "act"}),
                         TF2Program(build=lambda: dense, loss=lambda a, b: {"loss": tf.reduce_sum(
                             a(tf.cast(b["obs"], tf.float32)))}), batch, steps=1)
