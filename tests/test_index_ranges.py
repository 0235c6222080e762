"""An input holding an index out of the range the code takes it in (an action the policy
does not have) is refused naming the input, where in it, the value, the op and the fix,
on each side (pgtwin.parity.index_ranges)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.index_ranges import (IndexRangeError, check_fed_indices, index_error_from,
                                        index_uses)
from pgtwin.parity.programs import TF1Program
from tests import user_programs as up

tf1 = tf.compat.v1
BATCH = up.make_batch()  # 3 actions (up.ACTIONS)


def _graph_with(take):
    """A TF1 graph with an int64 placeholder ``a`` [None] handed to ``take(a)``."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        a = tf1.placeholder(tf.int64, [None], name="act_ph")
        take(a)
    return a


def test_a_one_hot_through_casts_and_reshapes_is_found_with_its_depth():
    a = _graph_with(lambda a: tf.one_hot(tf.reshape(tf.cast(a, tf.int32), [-1]), 4))
    (use,) = index_uses(a)
    assert (use.op.type, use.size, use.negatives_allowed) == ("OneHot", 4, True)


def test_a_one_hot_value_at_its_depth_is_refused_naming_the_silent_zero_row():
    a = _graph_with(lambda a: tf.one_hot(a, 3, name="onehot"))
    # [0, 3): 3 at index 2 is the first value outside it
    with pytest.raises(IndexRangeError) as err:
        check_fed_indices("actions", np.array([0, 2, 3, 5]), a)
    text = str(err.value)
    assert text.startswith("inputs['actions'] holds 3 at index (2,), outside [0, 3): TF1's "
                           "placeholder 'act_ph' reaches 'onehot', tf.one_hot(depth=3)")
    assert "all-zero row" in text and "Every value must lie in [0, 3)" in text


def test_minus_one_into_a_one_hot_is_the_padding_idiom_and_passes():
    a = _graph_with(lambda a: tf.one_hot(a, 3))
    check_fed_indices("actions", np.array([0, -1, 2]), a)  # nothing raised


def test_a_gather_from_a_variable_and_a_constant_table_take_their_rows():
    def take(a):
        table = tf1.get_variable("embedding", [5, 2])
        tf.gather(table, a)
        tf.gather(tf.constant(np.zeros((7, 2))), a, axis=0)
    a = _graph_with(take)
    assert sorted(u.size for u in index_uses(a)) == [5, 7]
    with pytest.raises(IndexRangeError, match=r"holds 5 at index \(1,\), outside \[0, 5\).*"
                                              r"a gather from 5 rows"):
        check_fed_indices("ids", np.array([4, 5, 6]), a)


def test_a_negative_label_is_refused_for_sparse_cross_entropy():
    def take(a):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=a, logits=tf.zeros([4, 2]))
    a = _graph_with(take)
    with pytest.raises(IndexRangeError, match=r"holds -1 at index \(0,\), outside \[0, 2\)"):
        check_fed_indices("actions", np.array([-1, 0, 1, 1]), a)


def test_an_op_the_harness_does_not_run_refuses_nothing():
    a = _graph_with(lambda a: tf.one_hot(a, 3))
    check_fed_indices("actions", np.array([7]), a, run=set())  # nothing raised


def test_a_float_placeholder_is_no_index():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None])
        tf.one_hot(tf.cast(x, tf.int32), 2)
    check_fed_indices("obs", np.array([5.0]), x)  # nothing raised: not an integer feed


def test_compare_refuses_the_batch_before_anything_runs_naming_the_tf1_placeholder():
    # the TF1 class takes act_ph in sparse_softmax_cross_entropy_with_logits over 3 logits
    actions = BATCH["actions"].copy()
    actions[4] = 3
    with pytest.raises(IndexRangeError) as err:
        compare_programs(up.tf1_program(), up.tf2_program(), dict(BATCH, actions=actions))
    assert str(err.value).startswith("inputs['actions'] holds 3 at index (4,), outside [0, 3): "
                                     "TF1's placeholder 'actions' reaches ")


def _one_hot_class():
    """The TF1 class with its log-probability as one_hot * log_softmax, which takes -1 (a
    padded step's action) as an all-zero row."""
    class OneHotPG(up.PolicyGradient):
        def __init__(self):
            super().__init__()  # its own loss (sparse cross-entropy) is not the one compared
            logp = tf.reduce_sum(tf.one_hot(self.act_ph, up.ACTIONS)
                                 * tf.nn.log_softmax(self.logits), axis=1)
            self.one_hot_loss = -tf.reduce_mean(logp * self.ret_ph)
    return OneHotPG()


def test_the_tf2_loss_raising_for_an_input_index_names_the_input_and_the_tf2_line():
    # TF1 (one_hot) takes -1 as the padding idiom; the port's sparse cross-entropy raises
    # for it, and the error names the input that holds it, not the port's code.
    program = TF1Program(build=_one_hot_class, loss="one_hot_loss",
                         feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"})
    actions = BATCH["actions"].copy()
    actions[6] = -1
    with pytest.raises(IndexRangeError) as err:
        compare_programs(program, up.tf2_program(), dict(BATCH, actions=actions), steps=0)
    text = str(err.value)
    # the op that raises depends on the kernels TensorFlow picks (SparseSoftmaxCrossEntropy
    # WithLogits, or a GatherV2 under op determinism)
    assert re.match(r"inputs\['actions'\] holds -1 at index \(6,\), outside \[0, 3\), the "
                    r"range that \w+ in TF2Program.loss \(", text), text
    assert "user_programs.py:" in text and "Every value must lie in [0, 3)" in text


def test_other_errors_are_not_taken_for_an_index():
    assert index_error_from(ValueError("label value of 3 which is outside the valid range "
                                       "of [0, 2)"), {"a": np.array([3])}, "x") is None
    try:
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[5], logits=tf.zeros([1, 2]))
    except tf.errors.InvalidArgumentError as e:
        err = e
    # the value is in no integer input (a float array holding 5.0 is no index)
    assert index_error_from(err, {"obs": np.array([5.0])}, "TF2Program.loss") is None
    found = index_error_from(err, {"obs": np.array([5.0]), "a": np.array([1, 5])},
                             "TF2Program.loss")
    assert str(found).startswith("inputs['a'] holds 5 at index (1,), outside [0, 2)")
