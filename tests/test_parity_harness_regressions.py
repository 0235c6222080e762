"""The function contract of pgtwin.parity.compare on the defects a new user hit (issue 12),
each reproduced as it was reported."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity import compare
from tests.test_parity_harness import INPUTS, OLD_WEIGHTS, eager_linear, legacy_linear, run

tf1 = tf.compat.v1


def test_a_tf1_variable_in_neither_loss_is_not_compared_rather_than_unread():
    # Reported: "eager_fn never read ..." for the critic of an actor-critic in the same graph.
    def with_critic(ph):
        out = legacy_linear(ph)
        tf1.get_variable("critic/v", [3], dtype=ph["x"].dtype)  # not in the loss
        return out

    weights = dict(OLD_WEIGHTS, **{"critic/v": np.ones(3)})
    report = run(legacy_build=with_critic, weights=weights)
    assert report.ok, report.to_table()
    row = next(r for r in report.rows if r.rung == "variables" and r.item == "critic/v")
    assert "not compared" in row.note


def test_global_step_made_by_hand_is_found_by_get_global_step():
    # Reported: TypeError: Existing "global_step" does not have integer type: resource.
    def with_step(ph):
        tf1.Variable(0, name="global_step", trainable=False)
        assert tf1.train.get_global_step() is not None
        return legacy_linear(ph)

    assert run(legacy_build=with_step).ok


def test_inputs_as_old_code_feeds_them_go_through_declared_dtypes():
    # Reported: a bare "Input 'y' of 'Mul' Op has type float64" for float64 returns into
    # float32 code: now input_dtypes declares the placeholders, and without it the error says so.
    def float32_code(ph):
        x = ph["x"]
        w = tf1.get_variable("old_scope/w", [3], dtype=tf.float32)
        b = tf1.get_variable("b", [], dtype=tf.float32)
        pred = tf.reduce_sum(x * w, axis=1) + b
        return {"loss": tf.reduce_mean(tf.square(pred - ph["y"])), "pred": pred}

    weights = {k: np.asarray(v, np.float32) for k, v in OLD_WEIGHTS.items()}
    with pytest.raises(TypeError) as err:
        compare(float32_code, eager_linear_f32, weights, INPUTS, name_map={"old_scope/w": "new/w"})
    # the cause (the placeholders' dtypes, from the inputs) before the symptom, then the fix
    text = str(err.value)
    assert text.index("{'x': 'float64', 'y': 'float64'}") < text.index("Input 'y' of 'Mul'")
    assert "input_dtypes=" in text
    report = compare(float32_code, eager_linear_f32, weights, INPUTS,
                     name_map={"old_scope/w": "new/w"},
                     input_dtypes={"x": "float32", "y": "float32"})
    assert report.ok, report.to_table()


def eager_linear_f32(v, inp):
    return eager_linear(v, {k: tf.cast(t, tf.float32) for k, t in inp.items()})


def test_a_keras_model_on_its_own_variables_is_reported_by_the_cause_first():
    # Reported: "eager_fn never read 'fc1/kernel'" (the symptom) came before the cause.
    layer = keras.layers.Dense(1, dtype="float64")

    def own_model(v, inp):
        pred = tf.squeeze(layer(inp["x"]), 1)
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    bad = run(own_model, steps=0).first_failure
    assert bad.rung == "variables" and "did not create" in bad.note
    symptoms = [r for r in run(own_model, steps=0).rows if "never read" in r.note]
    assert symptoms and all("because it used variables of its own" in r.note for r in symptoms)


def test_a_name_asked_for_is_only_matched_with_a_variable_of_its_kind():
    # Reported: a Keras Dense that gained a bias was advised to map a kernel onto the bias.
    def with_extra_bias(v, inp):
        pred = tf.reduce_sum(inp["x"] * v["new/w"], axis=1) + v["dense/bias"]
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    def kernel_only(ph):
        x = ph["x"]
        with tf1.variable_scope("old_scope"):
            w = tf1.get_variable("w", [3], dtype=x.dtype)
        pred = tf.reduce_sum(x * w, axis=1)
        return {"loss": tf.reduce_mean(tf.square(pred - ph["y"])), "pred": pred}

    report = run(with_extra_bias, legacy_build=kernel_only,
                 weights={"old_scope/w": OLD_WEIGHTS["old_scope/w"]})
    row = next(r for r in report.rows if r.item == "dense/bias")
    assert not row.ok and "use_bias=False" in row.note and "old_scope/w" not in row.note
