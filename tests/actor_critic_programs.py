"""A TF1 actor-critic with two optimizers, and its Keras migrations, right and wrong.

The TF1 side is written the way old A2C code is: an ``actor`` and a ``critic`` scope of
``get_variable``s, an advantage that stops the gradient at the critic's value, and two
``AdamOptimizer``s with their own learning rates, each minimising its own loss on its own
``var_list``, joined by ``tf.group``. The TF2 side holds two Keras models and two Keras
Adams, and its train step takes two tapes. ``loss`` is the sum of the two losses: each
network's gradient of it is its own loss's gradient (the networks share no variable and the
advantage is a constant to the actor).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from pgtwin.parity.programs import TF1Program, TF2Program
from tests.user_programs import ACTIONS, OBS, make_batch  # noqa: F401  (the same batch)

tf1 = tf.compat.v1

HIDDEN = 16
ACTOR_LR, CRITIC_LR = 3e-4, 1e-3


class TF1ActorCritic:
    """Old TF1 code: the graph, both optimizers and a Session, all in ``__init__``."""

    def __init__(self, dtype=tf.float32):
        self.obs_ph = tf1.placeholder(dtype, [None, OBS], name="obs")
        self.act_ph = tf1.placeholder(tf.int32, [None], name="actions")
        self.ret_ph = tf1.placeholder(dtype, [None], name="returns")
        with tf1.variable_scope("actor"):
            logits = _mlp(self.obs_ph, ACTIONS, dtype)
        with tf1.variable_scope("critic"):
            value = tf.squeeze(_mlp(self.obs_ph, 1, dtype), 1)
        advantage = tf.stop_gradient(self.ret_ph - value)
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act_ph,
                                                                 logits=logits)
        self.actor_loss = tf.reduce_mean(neglogp * advantage)
        self.critic_loss = tf.reduce_mean(tf.square(self.ret_ph - value))
        self.loss = self.actor_loss + self.critic_loss
        self.logits = logits
        actor_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "actor")
        critic_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "critic")
        self.actor_train = tf1.train.AdamOptimizer(ACTOR_LR).minimize(self.actor_loss,
                                                                     var_list=actor_vars)
        self.critic_train = tf1.train.AdamOptimizer(CRITIC_LR).minimize(self.critic_loss,
                                                                       var_list=critic_vars)
        self.train_op = tf.group(self.actor_train, self.critic_train)
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())


def _mlp(x, outputs: int, dtype):
    """One tanh hidden layer, then a linear one: ``fc1/w``, ``fc1/b``, ``out/w``, ``out/b``."""
    w1 = tf1.get_variable("fc1/w", [OBS, HIDDEN], dtype, tf1.glorot_uniform_initializer())
    b1 = tf1.get_variable("fc1/b", [HIDDEN], dtype, tf1.zeros_initializer())
    w2 = tf1.get_variable("out/w", [HIDDEN, outputs], dtype, tf1.glorot_uniform_initializer())
    b2 = tf1.get_variable("out/b", [outputs], dtype, tf1.zeros_initializer())
    return tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2) + b2


class KerasActorCritic:
    """The migration: two Keras models, two Keras Adams, a train step with two tapes.

    The wrong ones: ``critic_scale`` multiplies the critic's loss in the train step only;
    ``critic_beta_2`` is the critic Adam's; ``swap`` steps the actor with the critic's
    optimizer and the critic with the actor's."""

    def __init__(self, dtype="float32", critic_scale=1.0, critic_beta_2=0.999, swap=False,
                 compiled=False):
        self.actor = _keras_mlp(ACTIONS, dtype)
        self.critic = _keras_mlp(1, dtype)
        actor_opt = keras.optimizers.Adam(ACTOR_LR, epsilon=1e-8)
        critic_opt = keras.optimizers.Adam(CRITIC_LR, beta_2=critic_beta_2, epsilon=1e-8)
        if compiled:  # each network holds its own: model.compile(optimizer=...)
            self.actor.compile(optimizer=actor_opt)
            self.critic.compile(optimizer=critic_opt)
        else:
            self.actor_opt, self.critic_opt = actor_opt, critic_opt
        self.critic_scale, self.swap = critic_scale, swap

    def losses(self, obs, actions, returns):
        logits = self.actor(obs)
        value = tf.squeeze(self.critic(obs), 1)
        advantage = tf.stop_gradient(returns - value)
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
        actor_loss = tf.reduce_mean(neglogp * advantage)
        critic_loss = tf.reduce_mean(tf.square(returns - value))
        return {"loss": actor_loss + critic_loss, "logits": logits,
                "actor_loss": actor_loss, "critic_loss": critic_loss}

    def train_step(self, obs, actions, returns):
        with tf.GradientTape(persistent=True) as tape:
            out = self.losses(obs, actions, returns)
            critic_loss = out["critic_loss"] * self.critic_scale
        if hasattr(self, "actor_opt"):
            actor_opt, critic_opt = self.actor_opt, self.critic_opt
        else:
            actor_opt, critic_opt = self.actor.optimizer, self.critic.optimizer
        if self.swap:
            actor_opt, critic_opt = critic_opt, actor_opt
        actor_vars = self.actor.trainable_variables
        critic_vars = self.critic.trainable_variables
        actor_opt.apply_gradients(zip(tape.gradient(out["actor_loss"], actor_vars),
                                      actor_vars))
        critic_opt.apply_gradients(zip(
            tape.gradient(critic_loss, critic_vars), critic_vars))


def _keras_mlp(outputs: int, dtype: str) -> keras.Sequential:
    return keras.Sequential([keras.Input((OBS,), dtype=dtype),
                             keras.layers.Dense(HIDDEN, activation="tanh", dtype=dtype),
                             keras.layers.Dense(outputs, dtype=dtype)])


def tf1_program(dtype: str = "float32") -> TF1Program:
    return TF1Program(build=lambda: TF1ActorCritic(tf.as_dtype(dtype)),
                      feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"},
                      loss="loss", outputs={"logits": "logits"}, train_op="train_op")


def tf2_program(dtype: str = "float32", **options) -> TF2Program:
    return TF2Program(build=lambda: KerasActorCritic(dtype, **options),
                      loss=lambda a, b: a.losses(b["obs"], b["actions"], b["returns"]),
                      train_step=lambda a, b: a.train_step(b["obs"], b["actions"],
                                                           b["returns"]),
                      outputs=("logits",))
