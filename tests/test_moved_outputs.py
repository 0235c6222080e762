"""Outputs compared again at TF1's weights after the first step (weights_rung): a term equal
at the start, such as a KL taken the other way round, parts there."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


W0 = np.array([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]])


class Trust:
    """A surrogate -mean(exp(logp - old_logp) adv) and, as an output, KL(old || new) of
    the categorical policy, from old logits fed (TRPO's shape); SGD on the surrogate."""

    def __init__(self):
        self.obs = tf1.placeholder(tf.float64, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.adv = tf1.placeholder(tf.float64, [None], name="adv")
        self.old = tf1.placeholder(tf.float64, [None, 2], name="old_logits")
        logits = self.obs @ tf1.get_variable("pi/w", initializer=W0)
        logp_all, old_all = tf.nn.log_softmax(logits), tf.nn.log_softmax(self.old)
        self.kl = tf.reduce_mean(tf.reduce_sum(tf.exp(old_all) * (old_all - logp_all), 1))
        pick = tf.one_hot(self.act, 2, dtype=tf.float64)
        ratio = tf.exp(tf.reduce_sum((logp_all - old_all) * pick, 1))
        self.loss = -tf.reduce_mean(ratio * self.adv)
        self.train_op = tf1.train.GradientDescentOptimizer(1.0).minimize(self.loss)


def test_a_kl_taken_the_other_way_is_caught_after_the_first_step():
    # old == new at the start: KL(old || new) and KL(new || old) are both 0 there, with
    # equal (zero) gradients, so every rung agreed and the weights after one step too;
    # the outputs are now compared again at TF1's weights after the step, where they part
    rng = np.random.default_rng(17)
    obs = rng.normal(size=(12, 3))
    batch = {"obs": obs, "act": rng.integers(0, 2, 12), "adv": rng.normal(size=12),
             "old_logits": obs @ W0}
    dense = keras.layers.Dense(2, use_bias=False, name="pi", dtype="float64")
    optimizer = keras.optimizers.SGD(1.0)

    def loss(agent, b, reverse=True):
        logp_all = tf.nn.log_softmax(agent(b["obs"]))
        old_all = tf.nn.log_softmax(b["old_logits"])
        a, c = (logp_all, old_all) if reverse else (old_all, logp_all)
        kl = tf.reduce_mean(tf.reduce_sum(tf.exp(a) * (a - c), 1))
        pick = tf.one_hot(tf.cast(b["act"], tf.int32), 2, dtype=tf.float64)
        ratio = tf.exp(tf.reduce_sum((logp_all - old_all) * pick, 1))
        return {"loss": -tf.reduce_mean(ratio * b["adv"]), "kl": kl}

    def step(agent, b):
        with tf.GradientTape() as tape:
            value = loss(agent, b)["loss"]
        optimizer.apply_gradients(zip(tape.gradient(value, agent.trainable_variables),
                                      agent.trainable_variables))
    report = compare_programs(
        TF1Program(build=Trust, loss="loss", train_op="train_op", outputs={"kl": "kl"},
                   feeds={k: k for k in batch}),
        TF2Program(build=lambda: dense, loss=loss, train_step=step), batch, steps=1,
        dtype="float64")
    bad = report.first_failure
    assert bad is not None and bad.item == "kl: output after step 1", report.to_table()
    assert bad.note.startswith("the outputs agreed at the starting weights and part at the "
                               "weights after the first step")
