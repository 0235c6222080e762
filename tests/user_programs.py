"""A small TF1 policy-gradient class and its Keras migrations, right and wrong, for the harness.

The TF1 side is written the way old code is: placeholders, ``get_variable`` under
``variable_scope`` (``policy/fc1/weights``), a critic in the same graph that the policy
loss does not use, ``global_step`` as a plain ``tf.Variable`` found again through
``get_global_step()``, ``AdamOptimizer(lr).minimize``, and a ``Session`` opened in
``__init__``. The TF2 side is a plain Keras model that owns its variables, with its own
loss, optimizer and train step. ``make_batch`` feeds what old code feeds (float64 returns,
int64 actions) into the float32/int32 placeholders.
"""
from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1

OBS, HIDDEN, ACTIONS, LR = 4, 16, 3, 0.01


class PolicyGradient:
    """Old TF1 code: everything is built, and a Session opened, in ``__init__``."""

    def __init__(self, dtype=tf.float32, lr=LR, optimizer=None, clip_norm=None, l2=None):
        self.obs_ph = tf1.placeholder(dtype, [None, OBS], name="obs")
        self.act_ph = tf1.placeholder(tf.int32, [None], name="actions")
        self.ret_ph = tf1.placeholder(dtype, [None], name="returns")
        self.global_step = tf1.Variable(0, name="global_step", trainable=False)
        with tf1.variable_scope("policy"):
            w1 = tf1.get_variable("fc1/weights", [OBS, HIDDEN], dtype,
                                  tf1.glorot_uniform_initializer(),
                                  regularizer=(lambda w: l2 * tf.nn.l2_loss(w)) if l2 else None)
            b1 = tf1.get_variable("fc1/biases", [HIDDEN], dtype, tf1.zeros_initializer())
            w2 = tf1.get_variable("out/weights", [HIDDEN, ACTIONS], dtype,
                                  tf1.glorot_uniform_initializer())
            b2 = tf1.get_variable("out/biases", [ACTIONS], dtype, tf1.zeros_initializer())
        with tf1.variable_scope("critic"):
            wv = tf1.get_variable("v/weights", [OBS, 1], dtype)
        hidden = tf.tanh(tf.matmul(self.obs_ph, w1) + b1)
        self.logits = tf.matmul(hidden, w2) + b2
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act_ph,
                                                                 logits=self.logits)
        loss = tf.reduce_mean(neglogp * self.ret_ph)
        if l2:  # old code's regularized loss
            loss += tf1.losses.get_regularization_loss()
        self.loss = loss
        self.value_loss = tf.reduce_mean(tf.square(tf.squeeze(self.obs_ph @ wv, 1) - self.ret_ph))
        step = tf1.train.get_global_step()
        optimizer = optimizer(lr) if optimizer else tf1.train.AdamOptimizer(lr)
        if clip_norm is None:
            self.train_op = optimizer.minimize(loss, global_step=step)
        else:  # compute, clip by the global norm, apply: old code's clipping
            grads, variables = zip(*optimizer.compute_gradients(loss))
            grads, _ = tf.clip_by_global_norm(grads, clip_norm)
            self.train_op = optimizer.apply_gradients(zip(grads, variables), global_step=step)
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())


class KerasAgent:
    """The migration: a Keras model, a loss, a Keras Adam and a train step of its own."""

    def __init__(self, dtype="float32", epsilon=1e-8, reduce=tf.reduce_mean, from_logits=True,
                 kernel_initializer="glorot_uniform", last_activation=None, out_bias=True,
                 optimizer=None, train_last_layer_only=False, rmsprop_start=None, l2=None,
                 train_loss_scale=1.0, train_extra_term=0.0, train_sets_rate=None,
                 hidden_activation="tanh"):
        self.model = keras.Sequential([
            keras.layers.Dense(HIDDEN, activation=hidden_activation,
                               kernel_initializer=kernel_initializer,
                               kernel_regularizer=keras.regularizers.l2(l2) if l2 else None,
                               dtype=dtype),
            keras.layers.Dense(ACTIONS, activation=last_activation, use_bias=out_bias,
                               dtype=dtype)])
        self.optimizer = optimizer or keras.optimizers.Adam(LR, epsilon=epsilon)
        if rmsprop_start is not None:  # TF1's RMSPropOptimizer defaults, its mean square's start
            self.optimizer = keras.optimizers.RMSprop(LR, rho=0.9, epsilon=1e-10)
            self.model.build((None, OBS))
            self.optimizer.build(self.model.trainable_variables)
            for v in self.optimizer.variables:
                if "velocity" in v.name:
                    v.assign(tf.fill(v.shape, tf.cast(rmsprop_start, v.dtype)))
        self.ce = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits,
                                                             reduction=None, dtype=dtype)
        self.reduce = reduce
        self.train_last_layer_only = train_last_layer_only
        self.train_loss_scale = train_loss_scale  # a train step that minimises another loss
        self.train_extra_term = train_extra_term  # ... or adds a term the loss does not have
        self.train_sets_rate = train_sets_rate  # a rate the step sets (annealed-rate code)

    def compute_loss(self, obs, actions, returns):
        logits = self.model(obs)
        loss = self.reduce(self.ce(actions, logits) * returns) + sum(self.model.losses)
        return {"loss": loss, "logits": logits}

    def train_step(self, obs, actions, returns):
        if self.train_sets_rate is not None:
            self.optimizer.learning_rate.assign(self.train_sets_rate)
        with tf.GradientTape() as tape:
            out = self.compute_loss(obs, actions, returns)
            loss = out["loss"] * self.train_loss_scale
            if self.train_extra_term:  # e.g. a logits penalty only the train step has
                loss += self.train_extra_term * tf.reduce_mean(tf.square(out["logits"]))
        variables = (self.model.layers[-1].trainable_variables if self.train_last_layer_only
                     else self.model.trainable_variables)
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))


def make_batch(seed: int = 0, n: int = 32) -> dict[str, np.ndarray]:
    """One batch as old code feeds it: float64 obs and returns, int64 actions."""
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, OBS)), "actions": rng.integers(0, ACTIONS, n),
            "returns": rng.normal(size=n)}


def tf1_program(dtype: str = "float32") -> TF1Program:
    """The TF1 class as it is, read by attribute names."""
    return TF1Program(build=lambda: PolicyGradient(tf.as_dtype(dtype)),
                      feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"},
                      loss="loss", outputs={"logits": "logits"}, train_op="train_op")


def tf1_rmsprop_program(dtype: str = "float32") -> TF1Program:
    """The TF1 class with ``RMSPropOptimizer(lr)`` (decay 0.9, epsilon 1e-10, mean square
    starting at 1)."""
    return dataclasses.replace(tf1_program(dtype), build=lambda: PolicyGradient(
        tf.as_dtype(dtype), optimizer=tf1.train.RMSPropOptimizer))


def tf1_clipped_program(lr: float, clip_norm: float) -> TF1Program:
    """The TF1 class with its gradients clipped by their global norm before Adam."""
    return dataclasses.replace(tf1_program(), build=lambda: PolicyGradient(
        lr=lr, clip_norm=clip_norm))


def tf2_program(dtype: str = "float32", **agent_options) -> TF2Program:
    """The Keras migration; ``agent_options`` make the wrong ones (see KerasAgent)."""
    return TF2Program(
        build=lambda: KerasAgent(dtype, **agent_options),
        loss=lambda a, b: a.compute_loss(b["obs"], b["actions"], b["returns"]),
        train_step=lambda a, b: a.train_step(b["obs"], b["actions"], b["returns"]),
        model="model")


def tf2_keras_epsilon(dtype: str = "float32") -> TF2Program:
    """Wrong: Keras Adam's default epsilon 1e-7 (TF1's is 1e-8). Caught at weights."""
    return tf2_program(dtype, epsilon=1e-7)


def tf1_that_raises(dtype: str = "float32") -> TF1Program:
    """A factory with a bug of its own: what ``pgtwin compare`` says about it (exit 2)."""
    raise KeyError(f"no {dtype} checkpoint for the policy")
