"""What ``pgtwin compare`` is handed for the actor-critic example: TF1 graph, migrated actor.

``pgtwin compare --tf1 examples.tf1_actor_critic.programs:tf1 \\
--tf2 examples.tf1_actor_critic.programs:tf2 --inputs examples/tf1_actor_critic/batch.npz``

The TF1 object is the whole :class:`ActorCritic` (critic included, in the same graph and
Session); the program names the actor's loss and the actor's ``train_op``, so the critic's
variables are in neither and must be listed as "not compared", never a failure. The batch
holds the actor's feeds only (``obs``, ``actions``, ``advantages``).
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from examples.random_rollout import random_cartpole_steps, standardised_returns
from examples.tf1_actor_critic.tf1_actor_critic import ActorCritic
from examples.tf1_actor_critic.tf2_actor import ActorLearner
from examples.tf1_actor_critic.tf2_actor_wrong import (
    DefaultInitActor, HeadOnlyLearner, SumLossLearner)
from pgtwin.parity import TF1Program, TF2Program

OBS_DIM = 4
N_ACTIONS = 2
SEED = 0

#: The dtypes ``tf1`` builds in.
DTYPES = ("float32", "float64")
#: The factories of faithful migrations: every rung must pass (float32 and, where the TF1
#: side allows, float64).
FAITHFUL = ("tf2",)
#: Wrong migration factory -> the first rung (``pgtwin.parity.ladder.RUNGS``) that must fail
#: (at "initialisation" only when asked: that rung warns by default).
WRONG_MIGRATIONS = {"tf2_sum_loss": "loss", "tf2_head_only": "weights",
                    "tf2_default_init": "initialisation"}


def make_batch(seed: int, n: int = 64, dtype=np.float64) -> dict[str, np.ndarray]:
    """``n`` random-policy CartPole steps with normalised advantages, as ``train`` feeds the actor.

    Returns ``obs`` [n, 4] and ``advantages`` [n] in ``dtype`` (float64 by default, into
    float32 placeholders) and int64 ``actions`` [n]. The advantages are the standardised
    discounted returns, standing in for ``returns - values`` after A2C's normalisation.
    """
    steps = random_cartpole_steps(seed, n)
    advantages = standardised_returns(steps["rewards"], steps["episode_ends"])
    return {"obs": steps["obs"].astype(dtype), "actions": steps["actions"],
            "advantages": advantages.astype(dtype)}


def tf1(dtype: str = "float32") -> TF1Program:
    """The whole TF1 actor-critic; compared: the actor's loss, logits and ``actor_train_op``."""
    return TF1Program(
        build=functools.partial(ActorCritic, OBS_DIM, N_ACTIONS, seed=SEED,
                                dtype=tf.as_dtype(dtype)),
        feeds={"obs": "obs", "actions": "actions", "advantages": "advantages"},
        loss="actor_loss", outputs={"logits": "logits"}, train_op="actor_train_op")


def _tf2(learner_class: type[ActorLearner] = ActorLearner, dtype: str = "float32",
         **kwargs) -> TF2Program:
    return TF2Program(
        build=functools.partial(learner_class, OBS_DIM, N_ACTIONS, seed=SEED, dtype=dtype,
                                **kwargs),
        loss=lambda learner, inputs: learner.loss(
            inputs["obs"], inputs["actions"], inputs["advantages"]),
        outputs=["logits"], train_step=lambda learner, inputs: learner.train_step(inputs),
        optimizer="optimizer", model="actor")


def tf2(dtype: str = "float32") -> TF2Program:
    """The faithful actor: passes every rung with its own Adam (epsilon 1e-5), float32 and 64."""
    return _tf2(dtype=dtype)


def tf2_sum_loss(dtype: str = "float32") -> TF2Program:
    """``reduce_sum`` for ``reduce_mean``: the **loss** rung, ratio = batch size.

    Outputs (logits) agree; the TF2 loss is exactly B x TF1's (64 for the committed
    batch), which the hint should name as sum vs mean; the gradients are B x too. Adam is
    nearly scale-invariant, but with epsilon 1e-5 the weights still part (measured: up to
    5.4e-4 after step 1, float32 and float64).
    """
    return _tf2(SumLossLearner, dtype)


def tf2_head_only(dtype: str = "float32") -> TF2Program:
    """A train step that updates only the head (``actor.pi``): the **weights** rung.

    Everything up to the gradients agrees (the loss and its gradients are right; the
    harness's own restated optimizer would even pass). Only running the user's step shows
    it: after step 1 ``pi/kernel`` and ``pi/bias`` match TF1's (~5e-9) while ``h1/*``,
    ``h2/*`` are still at their loaded values, off by Adam's first step (measured max abs
    5.3e-4, lr = 7e-4); from step 2 on the head parts too (7.7e-5).
    """
    return _tf2(HeadOnlyLearner, dtype)


def tf2_default_init(dtype: str = "float32") -> TF2Program:
    """Keras' Glorot-uniform kernels where TF1 drew orthogonal ones: the **initialisation** rung.

    Only that rung can see it (later rungs load TF1's values). Kernel std, TF1 vs TF2:
    ``h1`` 4x64 sqrt(2)/8 = 0.177 vs sqrt(2/68) = 0.171 (close: the class and gain say
    it), ``h2`` 64x64 0.177 vs 0.125, ``pi`` 64x2 0.01/8 = 0.00125 vs sqrt(2/66) = 0.174
    (a factor of ~140). Biases are zeros on both sides. (Measured TF2 draws: 0.164, 0.126,
    0.186.)
    """
    return _tf2(dtype=dtype, actor_class=DefaultInitActor)
