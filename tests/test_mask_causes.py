"""Invalid-action masks filled another way on the TF2 side (-1e9 against the dtype's lowest
or -inf), the NaN a -inf fill makes downstream, and actions the mask forbids in the batch
(pgtwin.parity.row_causes)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.ladder import common_factor
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class MaskedPolicy:
    """TF1: logits over 4 actions, masked = logits + (1 - legal) * -1e9, the entropy of
    softmax(masked) (0 * -1e9 = 0 where an action is forbidden)."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.legal = tf1.placeholder(tf.float32, [None, 4], name="legal")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        logits = tf.matmul(self.obs, tf1.get_variable("pi/kernel", [3, 4]))
        self.masked = logits + (1.0 - self.legal) * -1e9
        logp_all = tf.nn.log_softmax(self.masked)
        self.entropy = -tf.reduce_sum(tf.nn.softmax(self.masked) * logp_all, 1)
        logp = tf.reduce_sum(tf.one_hot(self.act, 4) * logp_all, 1)
        self.loss = -tf.reduce_mean(logp) - 0.01 * tf.reduce_mean(self.entropy)


def _batch(forbidden_taken: bool = False):
    rng = np.random.default_rng(6)
    legal = np.ones((8, 4))
    legal[np.arange(8), rng.integers(0, 4, 8)] = 0.0  # one forbidden action a row
    act = np.array([int(np.flatnonzero(row)[0]) for row in legal])
    if forbidden_taken:
        act[5] = int(np.flatnonzero(legal[5] == 0)[0])
    return {"obs": rng.normal(size=(8, 3)), "legal": legal, "act": act}


def _compare(fill, batch):
    kernel = keras.layers.Dense(4, use_bias=False, name="pi")

    def loss(agent, b):
        logits = agent(tf.cast(b["obs"], tf.float32))
        masked = (logits + (1.0 - tf.cast(b["legal"], tf.float32)) * -1e9 if fill is None
                  else tf.where(b["legal"] > 0, logits, fill))  # None: TF1's own masking
        logp_all = tf.nn.log_softmax(masked)
        entropy = -tf.reduce_sum(tf.nn.softmax(masked) * logp_all, 1)
        logp = tf.reduce_sum(tf.one_hot(tf.cast(b["act"], tf.int32), 4) * logp_all, 1)
        return {"loss": -tf.reduce_mean(logp) - 0.01 * tf.reduce_mean(entropy),
                "masked": masked, "entropy": entropy}
    tf1_program = TF1Program(build=MaskedPolicy, loss="loss",
                             outputs={"masked": "masked", "entropy": "entropy"},
                             feeds={k: k for k in batch})
    return compare_programs(tf1_program, TF2Program(build=lambda: kernel, loss=loss), batch,
                            steps=0)


def test_the_lowest_float_as_the_fill_is_named_not_a_scaled_input():
    # -3.4e38 where TF1 adds -1e9: the 'masked' rows part only where legal is 0; a
    # least-squares factor of 3.4e29 carried by those entries was told as "an input
    # scaled on one side only"
    report = _compare(tf.float32.min, _batch())
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "masked"), report.to_table()
    assert bad.note.startswith("'masked' parts only where inputs['legal'] is 0 (8 entries: "
                               "TF1 -1e+09, TF2 -3.403e+38): the same mask with another fill "
                               "value"), bad.note
    assert all(r.ok for r in report.rows if r.item in ("entropy", "loss"))


def test_a_minus_inf_fill_and_the_nan_it_makes_in_the_entropy_are_named():
    report = _compare(-np.inf, _batch())
    rows = {r.item: r for r in report.rows}
    assert "TF2 -inf): the same mask with another fill value" in rows["masked"].note
    assert "a -inf fill makes NaN wherever a probability of 0 multiplies it" in \
        rows["masked"].note
    assert rows["entropy"].note.startswith("TF2's 'entropy' is NaN where TF1's is not: "
                                           "'masked' is -inf where the mask is 0")


def test_actions_the_mask_forbids_in_the_batch_are_warned():
    # both sides mask alike (TF1's additive -1e9), so every rung agrees: only a look at the
    # batch sees it
    report = _compare(None, _batch(forbidden_taken=True))
    assert report.ok, report.to_table()
    [row] = [r for r in report.warnings if r.item == "masked actions"]
    assert row.note.startswith("WARNING inputs['act'] takes actions that inputs['legal'] "
                               "marks 0 in 1 rows (5)"), row.note


def test_a_loss_that_parts_on_forbidden_actions_is_told_so_before_any_term():
    # TF2 fills with float32's lowest where TF1 adds -1e9: on a batch whose row 5 takes a
    # forbidden action, that row's -log-probability is the fill (about 1e9 against 3.4e38),
    # so the loss parts by the fills' gap; the numbers alone read as a term of TF1's loss
    # weighted another way
    report = _compare(tf.float32.min, _batch(forbidden_taken=True))
    [loss] = [r for r in report.rows if r.rung == "loss"]
    assert not loss.ok
    assert loss.note.startswith("inputs['act'] takes actions that inputs['legal'] marks 0 in "
                                "1 rows (5), and the loss takes their log-probabilities, each "
                                "side's mask fill"), loss.note
    assert "Compare on a batch without those rows (TF1 loss " in loss.note


@pytest.mark.parametrize("b", [np.array([1.0, 2.0, 3.0, 4.0]) * 3e38, [np.inf, 1.0, 1.0, 1.0]])
def test_no_factor_is_read_from_values_a_few_huge_entries_carry(b):
    a = np.array([-1e9, 0.5, 0.7, 0.9])
    assert common_factor(a, np.array([-1e9 * 3.4e29, 0.5, 0.7, 0.9]), 1e-4) is None
    assert common_factor(a, np.asarray(b, np.float64), 1e-4) is None
    assert common_factor(a, 2.0 * a, 1e-4) == pytest.approx(2.0)


class ParameterMask:
    """TF1: a 0/1 input [N, 4] that masks 4 parameter outputs (a parametrized action's:
    which parameters the chosen type has), multiplied in, no fill: the loss stays small."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.legal = tf1.placeholder(tf.float32, [None, 4], name="legal")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        params = tf.matmul(self.obs, tf1.get_variable("pi/kernel", [3, 4]))
        self.loss = tf.reduce_mean(tf.square(params) * self.legal) \
            + 0.0 * tf.reduce_sum(tf.cast(self.act, tf.float32))


def test_a_zero_in_a_mask_no_fill_reaches_is_no_forbidden_action():
    # the type-2 rows' column 2 is 0 in a parameter mask: no action is forbidden, and the
    # loss is small; the warning (and its loss cause) said their log-probabilities were
    # the mask's fill
    kernel = keras.layers.Dense(4, use_bias=False, name="pi")

    def loss(agent, b):
        params = agent(tf.cast(b["obs"], tf.float32))
        return {"loss": tf.reduce_mean(tf.square(params) * tf.cast(b["legal"], tf.float32))}
    batch = _batch(forbidden_taken=True)
    report = compare_programs(TF1Program(build=ParameterMask, loss="loss",
                                         feeds={k: k for k in batch}),
                              TF2Program(build=lambda: kernel, loss=loss), batch, steps=0)
    assert report.ok and not [r for r in report.rows if r.item == "masked actions"], \
        report.to_table()
