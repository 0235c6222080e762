"""Three plausible, wrong migrations of the actor, one changed piece each.

``programs.py`` says which rung catches each and what its numbers look like.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from examples.tf1_actor_critic.tf2_actor import ActorLearner


class SumLossLearner(ActorLearner):
    """WRONG: ``tf.reduce_sum`` where TF1 took ``reduce_mean`` (both terms): B x TF1's loss."""

    def loss(self, obs, actions, advantages) -> dict[str, tf.Tensor]:
        logits = self.actor(tf.cast(obs, self.dtype))
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(actions, tf.int32), logits=logits)
        pg_loss = tf.reduce_sum(tf.cast(advantages, self.dtype) * neglogp)
        entropy = tf.reduce_sum(
            -tf.reduce_sum(tf.nn.softmax(logits) * tf.nn.log_softmax(logits), axis=1))
        return {"loss": pg_loss - self.ent_coef * entropy, "logits": logits}


class HeadOnlyLearner(ActorLearner):
    """WRONG: the step updates only the policy head (``actor.pi``), e.g. left from fine-tuning.

    TF1's ``var_list`` was every actor variable; ``h1`` and ``h2`` never move here.
    """

    def trained_variables(self) -> list[tf.Variable]:
        return self.actor.pi.trainable_variables


class DefaultInitActor(keras.Model):
    """WRONG: plain ``Dense``: Glorot-uniform kernels, not orthogonal (gains sqrt(2), 0.01)."""

    def __init__(self, n_actions: int, hidden: int = 64, seed: int = 0, dtype: str = "float32"):
        super().__init__(name="actor", dtype=dtype)
        self.h1 = keras.layers.Dense(hidden, activation="tanh", name="h1", dtype=dtype)
        self.h2 = keras.layers.Dense(hidden, activation="tanh", name="h2", dtype=dtype)
        self.pi = keras.layers.Dense(n_actions, name="pi", dtype=dtype)

    def call(self, obs):
        return self.pi(self.h2(self.h1(obs)))
