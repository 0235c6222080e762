"""A TF1 policy with hand-written batch normalisation, and its Keras migrations.

The TF1 side is batch norm as old code wrote it before ``tf.layers`` had it: batch moments
by ``tf.nn.moments``, ``gamma``/``beta`` trained, ``moving_mean``/``moving_variance``
non-trainable variables moved by ``assign`` ops that go into the ``UPDATE_OPS`` collection,
and a ``train_op`` built under ``tf.control_dependencies`` on them (or, as a common bug,
without). The forward pass normalises with the batch's moments (training mode), so the
moving statistics never reach the loss: only the harness's state rows can see them.

The TF2 side is a Keras ``Dense`` (no bias), ``BatchNormalization`` and a head. Keras 3's
layer in training mode normalises with the biased batch variance, as ``tf.nn.moments``
gives it, and moves ``m <- momentum m + (1 - momentum) batch``, as the TF1 assigns do.
"""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1

OBS, HIDDEN, ACTIONS, LR, DECAY, EPSILON = 4, 8, 2, 0.05, 0.9, 1e-3


class BatchNormPolicy:
    """Old TF1 code: placeholders, hand-made batch norm, SGD ``minimize``, a Session."""

    def __init__(self, dtype=tf.float32, run_update_ops=True, count_steps=False):
        self.obs_ph = tf1.placeholder(dtype, [None, OBS], name="obs")
        self.act_ph = tf1.placeholder(tf.int32, [None], name="actions")
        self.ret_ph = tf1.placeholder(dtype, [None], name="returns")
        with tf1.variable_scope("policy"):
            w1 = tf1.get_variable("fc1/weights", [OBS, HIDDEN], dtype,
                                  tf1.glorot_uniform_initializer())
            gamma = tf1.get_variable("bn1/gamma", [HIDDEN], dtype, tf1.ones_initializer())
            beta = tf1.get_variable("bn1/beta", [HIDDEN], dtype, tf1.zeros_initializer())
            moving_mean = tf1.get_variable("bn1/moving_mean", [HIDDEN], dtype,
                                           tf1.zeros_initializer(), trainable=False)
            moving_var = tf1.get_variable("bn1/moving_variance", [HIDDEN], dtype,
                                          tf1.ones_initializer(), trainable=False)
            w2 = tf1.get_variable("out/weights", [HIDDEN, ACTIONS], dtype,
                                  tf1.glorot_uniform_initializer())
            b2 = tf1.get_variable("out/biases", [ACTIONS], dtype, tf1.zeros_initializer())
        h = tf.matmul(self.obs_ph, w1)
        mean, var = tf.nn.moments(h, axes=[0])
        for moving, batch in ((moving_mean, mean), (moving_var, var)):
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, tf1.assign(
                moving, moving * DECAY + batch * (1 - DECAY)))
        h = tf.nn.relu(tf.nn.batch_normalization(h, mean, var, beta, gamma, EPSILON))
        self.logits = tf.matmul(h, w2) + b2
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act_ph,
                                                                 logits=self.logits)
        self.loss = tf.reduce_mean(neglogp * self.ret_ph)
        updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) if run_update_ops else []
        step = tf1.train.get_or_create_global_step() if count_steps else None
        with tf.control_dependencies(updates):
            self.train_op = tf1.train.GradientDescentOptimizer(LR).minimize(self.loss,
                                                                            global_step=step)
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())


class KerasBatchNormAgent:
    """The migration: Dense (no bias), BatchNormalization, relu, Dense head; Keras SGD."""

    def __init__(self, dtype="float32", momentum=DECAY, epsilon=EPSILON, make_optimizer=None):
        self.dtype = dtype
        self.model = keras.Sequential([
            keras.layers.Dense(HIDDEN, use_bias=False, dtype=dtype, name="fc1"),
            keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon, dtype=dtype,
                                            name="bn1"),
            keras.layers.ReLU(dtype=dtype),
            keras.layers.Dense(ACTIONS, dtype=dtype, name="out")], name="policy")
        self.model.build((None, OBS))
        self.optimizer = make_optimizer() if make_optimizer else keras.optimizers.SGD(LR)

    def loss(self, b):
        logits = self.model(tf.cast(b["obs"], self.dtype), training=True)
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["actions"], tf.int32), logits=logits)
        return {"loss": tf.reduce_mean(neglogp * tf.cast(b["returns"], self.dtype)),
                "logits": logits}

    def train_step(self, b):
        with tf.GradientTape() as tape:
            loss = self.loss(b)["loss"]
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))


def make_batch(seed: int = 0, n: int = 32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(1.0, 2.0, size=(n, OBS)), "actions": rng.integers(0, ACTIONS, n),
            "returns": rng.normal(size=n)}


def tf1_program(dtype: str = "float32", run_update_ops: bool = True) -> TF1Program:
    return TF1Program(build=lambda: BatchNormPolicy(tf.as_dtype(dtype), run_update_ops),
                      feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"},
                      loss="loss", outputs={"logits": "logits"}, train_op="train_op")


def tf2_program(dtype: str = "float32", momentum: float = DECAY, epsilon: float = EPSILON,
                make_optimizer=None) -> TF2Program:
    return TF2Program(build=lambda: KerasBatchNormAgent(dtype, momentum, epsilon,
                                                        make_optimizer),
                      loss=lambda a, b: a.loss(b), train_step=lambda a, b: a.train_step(b),
                      model="model")
