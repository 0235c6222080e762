"""What ``pgtwin compare`` is handed for the agent-class example: the TF1 class and its migrations.

``pgtwin compare --tf1 examples.tf1_agent_class.programs:tf1 \\
--tf2 examples.tf1_agent_class.programs:tf2 --inputs examples/tf1_agent_class/batch.npz``

Every factory takes ``dtype`` ("float32" or "float64"); both sides build in it. The TF1
object is the unmodified :class:`PolicyGradient`; the TF2 ones are the faithful
:class:`PolicyGradientAgent` and three wrong variants, each named for its mistake and
documented with the rung that has to catch it.
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from examples.random_rollout import random_cartpole_steps, standardised_returns
from examples.tf1_agent_class.tf1_policy_gradient import PolicyGradient
from examples.tf1_agent_class.tf2_policy_gradient import PolicyGradientAgent
from examples.tf1_agent_class.tf2_policy_gradient_wrong import (
    GlorotInitAgent, KerasEpsilonAgent, NumpyLogProbsAgent)
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
WRONG_MIGRATIONS = {"tf2_keras_epsilon": "weights", "tf2_glorot_init": "initialisation",
                    "tf2_numpy_log_probs": "gradients"}


def make_batch(seed: int, n: int = 64, dtype=np.float64) -> dict[str, np.ndarray]:
    """``n`` random-policy CartPole steps as the class's ``learn`` feeds them.

    Returns ``obs`` [n, 4] and ``returns`` [n] (standardised discounted returns) in ``dtype``
    (float64 by default, into float32 placeholders) and int64 ``actions`` [n] (into int32).
    """
    steps = random_cartpole_steps(seed, n)
    returns = standardised_returns(steps["rewards"], steps["episode_ends"])
    return {"obs": steps["obs"].astype(dtype), "actions": steps["actions"],
            "returns": returns.astype(dtype)}


def tf1(dtype: str = "float32") -> TF1Program:
    """The TF1 class as written: its placeholders, ``self.loss``, ``self.train_op``."""
    return TF1Program(
        build=functools.partial(PolicyGradient, OBS_DIM, N_ACTIONS, seed=SEED,
                                dtype=tf.as_dtype(dtype)),
        feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"},
        loss="loss", outputs={"logits": "logits"}, train_op="train_op")


def _loss(agent: PolicyGradientAgent, inputs: dict) -> dict:
    return agent.loss(inputs["obs"], inputs["actions"], inputs["returns"])


def _train_step(agent: PolicyGradientAgent, inputs: dict):
    return agent.train_step(inputs)


def _tf2(agent_class: type[PolicyGradientAgent], dtype: str) -> TF2Program:
    return TF2Program(
        build=functools.partial(agent_class, OBS_DIM, N_ACTIONS, seed=SEED, dtype=dtype),
        loss=_loss, outputs=["logits"], train_step=_train_step, optimizer="optimizer",
        model="policy")


def tf2(dtype: str = "float32") -> TF2Program:
    """The faithful migration: passes every rung with its own Adam, float32 and float64."""
    return _tf2(PolicyGradientAgent, dtype)


def tf2_keras_epsilon(dtype: str = "float32") -> TF2Program:
    """Keras Adam's default epsilon (1e-7 vs TF1's 1e-8): the **weights** rung.

    Variables, initialisation, outputs, loss and gradients agree (the optimizer is not in
    them). The optimizer row names ``epsilon`` 1e-7 vs 1e-8, and the weights part where
    gradients are near epsilon (ReLU units that barely fire on the batch): measured on the
    committed batch, float32, max abs 4.8e-3 after step 1 (half of lr) against ~1e-7 for
    the faithful migration; elsewhere the difference is about ``lr * 9e-8 / |g|``.
    """
    return _tf2(KerasEpsilonAgent, dtype)


def tf2_glorot_init(dtype: str = "float32") -> TF2Program:
    """Keras' default initialisers, not ``truncated_normal(0.1)`` / ``0.1``: **initialisation**.

    Only the first rung can see it: the harness loads TF1's values before every later rung,
    so they all pass. Kernels: truncated normal, std 0.088 (0.1 x 0.88 for the cut at two
    sigma) vs Glorot-uniform, std sqrt(2 / (fan_in + fan_out)) = 0.236 (fc1, 4x32), 0.177
    (fc2, 32x32), 0.243 (logits, 32x2). Biases: all 0.1 vs all 0.
    """
    return _tf2(GlorotInitAgent, dtype)


def tf2_numpy_log_probs(dtype: str = "float32") -> TF2Program:
    """log pi(a|s) computed in numpy (no gradient path): the **gradients** rung.

    Outputs and loss agree to rounding (the value is right); every TF2 gradient is None
    where TF1's are not (the loss is a constant to the tape). Its own train step raises
    Keras' "No gradients provided for any variable".
    """
    return _tf2(NumpyLogProbsAgent, dtype)
