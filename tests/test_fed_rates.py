"""A learning rate TF1's loop feeds through a placeholder: convert-checkpoint says no
checkpoint holds it (pgtwin.parity.fed_rates, migrate.user_checkpoint); compare's halving
from step 2 is tested in test_code_parity and test_fed_gradients."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from pgtwin.migrate.user_checkpoint import convert_user_checkpoint
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
