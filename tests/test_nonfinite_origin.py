"""A loss that is NaN or inf on one side only: the report names that side's first non-finite
value, its op and the user's line that made it (pgtwin.parity.nonfinite_origin)."""
from __future__ import annotations

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1
HERE = __file__


class MaskedEntropy:
    """TF1: logits over 4 actions, masked with an additive -1e9, loss the mean entropy of
    softmax(masked) (p log p is 0 x -1e9 = 0 where an action is forbidden)."""

    def __init__(self, log_of_softmax: bool = False):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.legal = tf1.placeholder(tf.float32, [None, 4], name="legal")
        logits = tf.matmul(self.obs, tf1.get_variable("pi/kernel", [3, 4]))
        masked = logits + (1.0 - self.legal) * -1e9
        p = tf.nn.softmax(masked)
        # log(softmax) is log(0) = -inf where the mask is 0, and 0 x -inf = NaN
        logp = tf.math.log(p) if log_of_softmax else tf.nn.log_softmax(masked)
        self.loss = tf.reduce_mean(tf.reduce_sum(p * logp, 1))


def _batch():
    rng = np.random.default_rng(7)
    legal = np.ones((6, 4))
    legal[np.arange(6), rng.integers(0, 4, 6)] = 0.0
    return {"obs": rng.normal(size=(6, 3)), "legal": legal}


def _fill_line(fn) -> int:
    """The line of ``fn``'s source that holds the mask's fill."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if "FILL" in line)


def _tf2(fill: float, traced: bool):
    kernel = keras.layers.Dense(4, use_bias=False, name="pi")

    def entropy(agent, b):
        logits = agent(tf.cast(b["obs"], tf.float32))
        masked = tf.where(b["legal"] > 0, logits, fill)  # FILL
        return {"loss": tf.reduce_mean(tf.reduce_sum(tf.nn.softmax(masked)
                                                     * tf.nn.log_softmax(masked), 1))}
    loss = tf.function(entropy) if traced else entropy
    return TF2Program(build=lambda: kernel, loss=loss), _fill_line(entropy)


@pytest.mark.parametrize("traced", [False, True])
def test_a_minus_inf_fill_that_makes_the_tf2_loss_nan_is_named_at_its_line(traced):
    # softmax(-inf) is 0 and log_softmax(-inf) is -inf: 0 x -inf = NaN in the TF2 loss;
    # TF1's -1e9 gives 0 x -1e9 = 0. The first non-finite values are tf.where's -inf, one
    # a row of the 6
    program, line = _tf2(-np.inf, traced)
    report = compare_programs(TF1Program(build=MaskedEntropy, loss="loss",
                                         feeds={"obs": "obs", "legal": "legal"}),
                              program, _batch(), steps=0)
    [loss] = [r for r in report.rows if r.rung == "loss"]
    assert not loss.ok
    assert loss.note.startswith(
        f"the TF2 loss's first non-finite values are made by SelectV2 (tf.where) at "
        f"{HERE}:{line} in entropy (6 -Inf of 24 values): from there they reach the loss "
        "(TF2 loss nan, TF1 loss "), loss.note
    # the process's settings are put back
    assert not tf.config.functions_run_eagerly()
    assert np.isnan(tf.math.log(tf.constant(-1.0)).numpy())  # check numerics off again


def test_a_log_of_a_softmax_that_makes_the_tf1_loss_nan_is_named_at_its_line():
    # TF1 takes log(softmax(masked)): log(0) = -inf at the 6 masked entries (softmax of
    # -1e9 underflows to 0 in float32), and then 0 x -inf = NaN; the TF2 side is finite
    program, _ = _tf2(-1e9, False)
    report = compare_programs(TF1Program(build=lambda: MaskedEntropy(log_of_softmax=True),
                                         loss="loss", feeds={"obs": "obs", "legal": "legal"}),
                              program, _batch(), steps=0)
    [loss] = [r for r in report.rows if r.rung == "loss"]
    lines, start = inspect.getsourcelines(MaskedEntropy.__init__)
    line = start + next(i for i, s in enumerate(lines) if "tf.math.log(p)" in s)
    assert loss.note.startswith(
        f"the TF1 loss's first non-finite values are made by Log (tf.math.log) at "
        f"{HERE}:{line} in __init__ (6 -Inf of 24 values)"), loss.note
    assert "as the TF2 code does" in loss.note
