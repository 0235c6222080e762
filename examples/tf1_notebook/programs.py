"""What ``pgtwin compare`` is handed for the notebook example: the script and its migrations.

``pgtwin compare --tf1 examples.tf1_notebook.programs:tf1 \\
--tf2 examples.tf1_notebook.programs:tf2 --inputs examples/tf1_notebook/batch.npz``

The TF1 side is ``tf1_notebook.py`` run as it is, through :meth:`TF1Program.from_script`;
its feeds include the 0-d ``entropy_coef`` placeholder. The notebook hard-codes float32
placeholders, so only ``tf2*`` factories accept ``dtype="float64"``; ``tf1`` refuses it.
Two faithful migrations: Keras 3 (``tf2``) and legacy ``tf_keras`` (``tf2_tf_keras``).
"""
from __future__ import annotations

import functools
import os

import numpy as np

from examples.random_rollout import random_cartpole_steps, standardised_returns
from examples.tf1_notebook.tf2_keras import PolicyNet, build_policy
from examples.tf1_notebook.tf2_tf_keras import Trainer
from examples.tf1_notebook.tf2_wrong import (
    DoubleSoftmaxPolicy, FromLogitsDefaultPolicy, TfKerasEpsilonTrainer)
from pgtwin.parity import TF1Program, TF2Program

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_notebook.py")
ENTROPY_COEF = 0.01  # the notebook's ENTROPY_COEF, fed through its 0-d placeholder
SEED = 0

#: The dtypes ``tf1`` builds in.
DTYPES = ("float32",)
#: The factories of faithful migrations: every rung must pass (float32 and, where the TF1
#: side allows, float64).
FAITHFUL = ("tf2", "tf2_tf_keras")
#: Wrong migration factory -> the first rung (``pgtwin.parity.ladder.RUNGS``) that must fail
#: (at "initialisation" only when asked: that rung warns by default).
WRONG_MIGRATIONS = {"tf2_from_logits_default": "loss", "tf2_double_softmax": "loss",
                    "tf2_tf_keras_epsilon": "weights"}


def make_batch(seed: int, n: int = 64, dtype=np.float64) -> dict[str, np.ndarray]:
    """``n`` random-policy CartPole steps and the entropy coefficient, as the notebook feeds them.

    Returns ``obs`` [n, 4], ``returns`` [n] and ``entropy_coef`` [] (0-d) in ``dtype``
    (float64 by default, into float32 placeholders) and int64 ``actions`` [n].
    """
    steps = random_cartpole_steps(seed, n)
    returns = standardised_returns(steps["rewards"], steps["episode_ends"])
    return {"obs": steps["obs"].astype(dtype), "actions": steps["actions"],
            "returns": returns.astype(dtype), "entropy_coef": np.asarray(ENTROPY_COEF, dtype)}


def tf1(dtype: str = "float32") -> TF1Program:
    """The notebook's top-level graph: feeds by placeholder name, ``loss``, ``train_op``."""
    if dtype != "float32":
        raise ValueError(f"examples.tf1_notebook: the notebook's placeholders are float32 "
                         f"(written into the script), so it cannot be built in {dtype}; "
                         f"compare it in float32")
    return TF1Program.from_script(
        SCRIPT, feeds={"obs": "obs", "actions": "actions", "returns": "returns",
                       "entropy_coef": "entropy_coef"},
        loss="loss", train_op="train_op")


def _keras3(model_class: type[PolicyNet], dtype: str) -> TF2Program:
    return TF2Program(
        build=functools.partial(build_policy, seed=SEED, dtype=dtype, model_class=model_class),
        loss=lambda model, inputs: model.policy_loss(inputs),
        train_step=lambda model, inputs: model.train_step(inputs), optimizer="optimizer")


def _tf_keras(trainer_class: type[Trainer], dtype: str) -> TF2Program:
    return TF2Program(
        build=functools.partial(trainer_class, seed=SEED, dtype=dtype),
        loss=lambda trainer, inputs: trainer.loss(inputs),
        train_step=lambda trainer, inputs: trainer.train_step(inputs),
        optimizer="optimizer", model="model")


def tf2(dtype: str = "float32") -> TF2Program:
    """Faithful, Keras 3: a subclassed model, ``compile``'s Adam, its own ``train_step``."""
    return _keras3(PolicyNet, dtype)


def tf2_tf_keras(dtype: str = "float32") -> TF2Program:
    """Faithful, legacy Keras: a ``tf_keras.Sequential`` and ``tf_keras.optimizers.Adam``."""
    return _tf_keras(Trainer, dtype)


def tf2_from_logits_default(dtype: str = "float32") -> TF2Program:
    """``SparseCategoricalCrossentropy()`` on logits (``from_logits=False``): the **loss** rung.

    Variables, initialisation (Glorot / zeros on both sides) and the forward pass agree.
    The loss does not: Keras reads the logits as probabilities, normalised by their sum and
    clipped at 1e-7, so ``-log p`` is far from the softmax cross-entropy and can change
    sign (a hint should say ``from_logits=True``): measured on the committed batch, TF2 /
    TF1 loss = 0.229 / 0.0260 (ratio 8.8). Gradients and weights part after it.
    """
    return _keras3(FromLogitsDefaultPolicy, dtype)


def tf2_double_softmax(dtype: str = "float32") -> TF2Program:
    """A softmax head fed to ``from_logits=True`` (softmax applied twice): the **loss** rung.

    No outputs are compared for this example, so the loss is the first rung to differ:
    with two actions the second softmax squeezes the probabilities towards 1/2 (inputs in
    [0, 1] differ by at most 1), so the cross-entropy is close to log 2 everywhere and
    the entropy near its maximum log 2; TF1's are spread (measured loss 0.0106 / 0.0260,
    ratio 0.41). A hint should name the double softmax; a compared ``logits`` output would
    catch it one rung earlier.
    """
    return _keras3(DoubleSoftmaxPolicy, dtype)


def tf2_tf_keras_epsilon(dtype: str = "float32") -> TF2Program:
    """tf_keras Adam's default epsilon (1e-7 vs 1e-8): the **weights** rung, via ``get_config``.

    Everything before the optimizer agrees; the optimizer row must read tf_keras' config
    (``epsilon`` 1e-7 vs 1e-8). The weights part too where gradients are near epsilon:
    measured max abs 5.2e-4 after step 1 (half of lr 1e-3), against ~2e-7 when faithful.
    """
    return _tf_keras(TfKerasEpsilonTrainer, dtype)
