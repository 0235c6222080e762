"""A TF1 critic with a frozen target network, and its Keras migrations.

The TF1 side is the shape DQN, DDPG and TD3 code has: an ``online`` and a ``target`` value
network built by one function, the target's variables ``trainable=False`` and synced from the
online ones by assign ops run once after the initializer; the TD loss reads both, and
``minimize`` trains the online ones. The TF2 side holds two Keras models and freezes the
target the two ways Keras allows: ``model.trainable = False`` after it is built, or
``Dense(..., trainable=False)`` from the start. In Keras 3 either leaves the ``tf.Variable``
behind each weight with ``trainable=True`` (the flag lives on Keras' own variable).
"""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1

OBS, HIDDEN, GAMMA, LR = 3, 6, 0.95, 0.02


class TargetCritic:
    """Old TF1 code: placeholders, two scopes built by one function, Adam, a Session."""

    def __init__(self, tau: float | None = None, target_trainable: bool = False):
        self.obs_ph = tf1.placeholder(tf.float32, [None, OBS], name="obs")
        self.next_ph = tf1.placeholder(tf.float32, [None, OBS], name="next_obs")
        self.rew_ph = tf1.placeholder(tf.float32, [None], name="rewards")
        self.value = self._critic(self.obs_ph, "online", trainable=True)
        # target_trainable: Morvan-style DQN code, whose target is trainable but left out of
        # minimize's var_list
        next_value = self._critic(self.next_ph, "target", trainable=target_trainable)
        online = tf1.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES, "online")
        target = tf1.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES, "target")
        sync = tf.group(*[t.assign(o) for o, t in zip(online, target)])
        td = self.rew_ph + GAMMA * next_value - self.value
        self.loss = tf.reduce_mean(tf.square(td))
        self.train_op = tf1.train.AdamOptimizer(LR).minimize(self.loss, var_list=online)
        if tau is not None:  # DDPG's soft update, run after the step
            with tf.control_dependencies([self.train_op]):
                self.train_op = tf.group(*[t.assign(tau * o + (1 - tau) * t)
                                           for o, t in zip(online, target)],
                                         name="soft_update")
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())
        self.sess.run(sync)

    @staticmethod
    def _critic(x, scope, trainable):
        with tf1.variable_scope(scope):
            w1 = tf1.get_variable("w1", [OBS, HIDDEN], trainable=trainable)
            b1 = tf1.get_variable("b1", [HIDDEN], initializer=tf1.zeros_initializer(),
                                  trainable=trainable)
            w2 = tf1.get_variable("w2", [HIDDEN, 1], trainable=trainable)
            return tf.squeeze(tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2), 1)


def _critic(name: str, frozen_layers: bool) -> keras.Model:
    return keras.Sequential([
        keras.Input((OBS,)),
        keras.layers.Dense(HIDDEN, activation="tanh", name=f"{name}_h",
                           trainable=not frozen_layers),
        keras.layers.Dense(1, use_bias=False, name=f"{name}_v",
                           trainable=not frozen_layers)], name=name)


class KerasTargetCritic:
    """The migration: ``how`` freezes the target (``"model"``: ``trainable = False`` after
    building it; ``"layers"``: built frozen; ``"forgotten"``: not frozen at all)."""

    def __init__(self, how: str = "model", tau: float | None = None, synced: bool = True):
        self.tau = tau
        self.online = _critic("online", frozen_layers=False)
        self.target = _critic("target", frozen_layers=how == "layers")
        if synced:  # False: the port forgets the first copy TF1's __init__ runs
            self.target.set_weights(self.online.get_weights())
        if how == "model":
            self.target.trainable = False
        self.optimizer = keras.optimizers.Adam(LR, epsilon=1e-8)

    def loss(self, b):
        value = tf.squeeze(self.online(b["obs"]), 1)
        next_value = tf.squeeze(self.target(b["next_obs"]), 1)
        td = b["rewards"] + GAMMA * next_value - value
        return {"loss": tf.reduce_mean(tf.square(td)), "value": value}

    def train_step(self, b):
        with tf.GradientTape() as tape:
            loss = self.loss(b)["loss"]
        weights = self.online.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
        if self.tau is not None:
            for o, t in zip(self.online.weights, self.target.weights):
                t.assign(self.tau * o + (1 - self.tau) * t)


def make_batch(seed: int = 0, n: int = 24) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, OBS)), "next_obs": rng.normal(size=(n, OBS)),
            "rewards": rng.normal(size=n)}


def tf1_program(tau: float | None = None, target_trainable: bool = False) -> TF1Program:
    """``tau``: the target is moved towards the online network after each step (else it
    is copied once, after the initializer)."""
    return TF1Program(build=lambda: TargetCritic(tau, target_trainable),
                      feeds={"obs": "obs_ph", "next_obs": "next_ph", "rewards": "rew_ph"},
                      loss="loss", outputs={"value": "value"}, train_op="train_op")


def tf2_program(how: str = "model", tau: float | None = None, synced: bool = True
                ) -> TF2Program:
    return TF2Program(build=lambda: KerasTargetCritic(how, tau, synced), loss=lambda a, b: a.loss(b),
                      train_step=lambda a, b: a.train_step(b))
