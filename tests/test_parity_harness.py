"""pgtwin.parity.compare on small hand-made TF1/TF2 pairs: each rung made to pass and to fail.

The pairs are a linear regression ``pred = x . w + b``, ``loss = mean((pred - y)^2)``,
written once per side. Each failing case perturbs the TF2 side by a known amount, so the
expected error is derived by hand in a comment next to it.
"""
from __future__ import annotations

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity import assert_parity, compare
from pgtwin.parity.ladder import ParityReport, Row

tf1 = tf.compat.v1

WEIGHTS = {"w": np.array([0.5, -1.0, 2.0]), "b": np.array(0.25)}
INPUTS = {
    "x": np.array([[1.0, 2.0, 3.0], [0.5, -0.5, 1.0], [-1.0, 0.0, 2.0], [2.0, 1.0, -1.0]]),
    "y": np.array([1.0, -2.0, 0.5, 3.0]),
}


def legacy_linear(ph):
    x = ph["x"]
    with tf1.variable_scope("old_scope"):
        w = tf1.get_variable("w", [3], dtype=x.dtype)
    b = tf1.get_variable("b", [], dtype=x.dtype)
    pred = tf.reduce_sum(x * w, axis=1) + b
    return {"loss": tf.reduce_mean(tf.square(pred - ph["y"])), "pred": pred}


def eager_linear(v, inp, w_name="new/w"):
    pred = tf.reduce_sum(inp["x"] * v[w_name], axis=1) + v["b"]
    return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}


OLD_WEIGHTS = {"old_scope/w": WEIGHTS["w"], "b": WEIGHTS["b"]}
NAME_MAP = {"old_scope/w": "new/w"}


def run(eager_fn=eager_linear, legacy_build=legacy_linear, **kw):
    kw.setdefault("name_map", NAME_MAP)
    kw.setdefault("dtype", "float64")
    return compare(legacy_build, eager_fn, kw.pop("weights", OLD_WEIGHTS), INPUTS, **kw)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_faithful_migration_passes_every_rung(dtype):
    report = run(dtype=dtype, optimizer=("adam", {"learning_rate": 0.1}))
    assert report.ok, report.to_table()
    rungs = [r.rung for r in report.rows]
    for rung in ("variables", "outputs", "loss", "gradients", "weights"):
        assert rung in rungs
    assert {r.item for r in report.rows if r.rung == "variables"} == {"old_scope/w -> new/w", "b"}
    assert all(dtype in r.context for r in report.rows)
    weight_rows = [r for r in report.rows if r.rung == "weights" and r.item in ("old_scope/w", "b")]
    assert [r.context.split(", ")[-1] for r in weight_rows] == ["step 3/3"] * 2


def test_outputs_rung_reports_the_relative_error_of_a_scaled_output():
    def scaled(v, inp):
        out = eager_linear(v, inp)
        return {"loss": out["loss"], "pred": out["pred"] * 1.001}
    report = run(scaled)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "pred")
    # |p - 1.001 p| / max(|p|, |1.001 p|) = 0.001 / 1.001 for every element
    assert bad.max_rel == pytest.approx(0.001 / 1.001, rel=1e-9)


def test_gradients_rung_sees_a_wrong_backward_pass_with_an_equal_loss():
    @tf.custom_gradient
    def doubled_grad(t):
        return tf.identity(t), lambda dy: 2.0 * dy

    def wrong_backward(v, inp):
        pred = tf.reduce_sum(inp["x"] * doubled_grad(v["new/w"]), axis=1) + v["b"]
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    report = run(wrong_backward)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("gradients", "old_scope/w")
    # |g - 2g| / |2g| = 1/2 for every nonzero element; b's gradient is untouched
    assert bad.max_rel == pytest.approx(0.5, rel=1e-12)
    assert next(r for r in report.rows if r.rung == "gradients" and r.item == "b").ok


def test_a_loss_from_numpy_values_fails_at_gradients_naming_every_variable():
    def numpy_pred(v, inp):  # seed 000: the values leave the tape through numpy
        pred = tf.constant(eager_linear(v, inp)["pred"].numpy())
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    report = run(numpy_pred)
    assert report.first_failure.rung == "gradients"
    failing = [r for r in report.rows if r.rung == "gradients" and not r.ok]
    assert [r.item for r in failing] == ["old_scope/w", "b"]
    assert all("DisconnectedGradientError on the eager side" in r.note for r in failing)
    # The loss itself agrees: only the gradient rung can see this bug.
    assert next(r for r in report.rows if r.rung == "loss").ok


def test_one_disconnected_variable_on_the_tf1_side_is_named_alone():
    def legacy_stopped_bias(ph):
        x = ph["x"]
        with tf1.variable_scope("old_scope"):
            w = tf1.get_variable("w", [3], dtype=x.dtype)
        b = tf1.get_variable("b", [], dtype=x.dtype)
        pred = tf.reduce_sum(x * w, axis=1) + tf.stop_gradient(b)
        return {"loss": tf.reduce_mean(tf.square(pred - ph["y"])), "pred": pred}

    report = run(legacy_build=legacy_stopped_bias)
    failing = [r for r in report.rows if not r.ok and r.rung == "gradients"]
    assert [r.item for r in failing] == ["b"]
    assert "on the TF1 side" in failing[0].note


def test_no_gradient_on_either_side_is_parity_and_says_so():
    def legacy_with_spare(ph):
        tf1.get_variable("spare", [2], dtype=ph["x"].dtype)
        return legacy_linear(ph)

    def eager_reading_spare(v, inp):
        v["spare"].read_value()
        return eager_linear(v, inp)

    weights = {**OLD_WEIGHTS, "spare": np.zeros(2)}
    report = run(eager_reading_spare, legacy_with_spare, weights=weights, steps=1)
    assert report.ok, report.to_table()
    row = next(r for r in report.rows if r.rung == "gradients" and r.item == "spare")
    assert "either side" in row.note


def test_keras_default_epsilon_fails_at_the_weights_rung_by_the_derived_amount():
    lr, g = 0.1, 1e-7

    def legacy_const_grad(ph):
        w = tf1.get_variable("w", [2], dtype=ph["c"].dtype)
        return tf.reduce_sum(ph["c"] * w)

    def eager_const_grad(v, inp):
        return tf.reduce_sum(inp["c"] * v["w"])

    pair = (lambda: tf1.train.AdamOptimizer(lr),  # epsilon 1e-8
            lambda: keras.optimizers.Adam(lr))  # epsilon 1e-7 (Keras' default)
    report = compare(legacy_const_grad, eager_const_grad, {"w": np.zeros(2)},
                     {"c": np.full(2, g)}, steps=1, optimizer=pair, dtype="float64")
    first = report.first_failure
    assert (first.rung, first.item) == ("weights", "optimizer.epsilon")
    assert "1e-08" in first.note and "1e-07" in first.note
    # Step 1 of Adam with gradient g (both TF1 and Keras add epsilon to sqrt(v), not to
    # sqrt(v_hat)): m = (1-b1) g, v = (1-b2) g^2, alpha = lr sqrt(1-b2) / (1-b1), so
    # dw = alpha m / (sqrt(v) + eps) = lr g / (g + eps / sqrt(1-b2)).
    s = math.sqrt(1 - 0.999)
    expected = lr * g * (1 / (g + 1e-8 / s) - 1 / (g + 1e-7 / s))  # = lr (0.2403 - 0.0307)
    row = next(r for r in report.rows if r.rung == "weights" and r.item == "w")
    assert not row.ok
    assert row.max_abs == pytest.approx(expected, rel=1e-5)


def test_matching_optimizer_pair_passes_in_float32():
    pair = (lambda: tf1.train.AdamOptimizer(0.1, epsilon=1e-7),
            lambda: keras.optimizers.Adam(0.1, epsilon=1e-7))
    assert run(dtype="float32", optimizer=pair).ok


def test_different_optimizer_kinds_are_named():
    pair = (lambda: tf1.train.GradientDescentOptimizer(0.1), lambda: keras.optimizers.Adam(0.1))
    bad = run(optimizer=pair, steps=1).first_failure
    assert (bad.rung, bad.item) == ("weights", "optimizer")
    assert "GradientDescentOptimizer" in bad.note and "Adam" in bad.note


def test_float64_plain_tf1_adam_drift_is_explained():
    pair = (lambda: tf1.train.AdamOptimizer(0.1), lambda: keras.optimizers.Adam(0.1, epsilon=1e-8))
    report = run(optimizer=pair)
    bad = report.first_failure
    assert bad.rung == "weights" and not bad.item.startswith("optimizer")
    assert "float32" in bad.note and bad.max_rel < 1e-4


def test_without_the_name_map_the_missing_name_and_its_candidate_are_listed():
    report = run(name_map={})
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("variables", "new/w")
    assert "'old_scope/w'" in bad.note
    assert {r.rung for r in report.rows} == {"variables"}  # the ladder stops there


def test_a_tf_function_eager_fn_is_compared_and_its_missing_names_reported():
    traced = tf.function(eager_linear)
    assert run(traced, steps=1).ok
    bad = run(traced, name_map={}).first_failure  # autograph re-raises as StagingError
    assert (bad.rung, bad.item) == ("variables", "new/w")


def test_name_map_errors_are_rows():
    report = run(name_map={**NAME_MAP, "old_scope/typo": "x"})
    bad = report.first_failure
    assert bad.item == "old_scope/typo -> x" and "not a TF1 variable" in bad.note
    report = run(name_map={"old_scope/w": "b"})
    assert "all map to this TF2 name" in report.first_failure.note


def test_a_variable_the_tf2_side_never_reads_is_flagged():
    def ignores_bias(v, inp):
        pred = tf.reduce_sum(inp["x"] * v["new/w"], axis=1) + 0.25
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    report = run(ignores_bias, steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("variables", "b")
    assert "never read 'b'" in bad.note and "['b']" in bad.note  # b has no name_map entry


def test_a_variable_created_outside_the_harness_is_flagged():
    own = tf.Variable(0.25, dtype=tf.float64, name="stray_bias")

    def own_bias(v, inp):
        pred = tf.reduce_sum(inp["x"] * v["new/w"], axis=1) + own + 0.0 * v["b"]
        return {"loss": tf.reduce_mean(tf.square(pred - inp["y"])), "pred": pred}

    rows = [r for r in run(own_bias, steps=0).rows if not r.ok]
    assert any(r.rung == "variables" and r.item == "stray_bias" and "did not create" in r.note
               for r in rows)


def test_weights_that_do_not_fit_the_graph_are_listed_together():
    weights = {"old_scope/w": np.zeros(4), "old_scope/W": np.zeros(3)}  # b missing
    report = run(weights=weights)
    notes = {r.item: r.note for r in report.rows if not r.ok}
    assert "shape: TF1 variable (3,), weights (4,)" in notes["old_scope/w"]
    assert "no value in weights" in notes["b"]
    assert "no such trainable variable" in notes["old_scope/W"]
    assert {r.rung for r in report.rows} == {"variables"}


def test_outputs_returned_by_one_side_only_fail():
    def loss_only(v, inp):
        return eager_linear(v, inp)["loss"]
    bad = run(loss_only, steps=0).first_failure
    assert (bad.rung, bad.item) == ("outputs", "pred") and "only legacy_build" in bad.note


def test_weights_none_takes_the_tf1_initializers():
    seen = []

    def legacy_init(ph):
        w = tf1.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0], ph["x"].dtype))
        return tf.reduce_sum(tf.reduce_sum(ph["x"] * w, axis=1))

    def eager_sum(v, inp):
        seen.append(v["w"].numpy().copy())
        return tf.reduce_sum(tf.reduce_sum(inp["x"] * v["w"], axis=1))

    report = compare(legacy_init, eager_sum, None, INPUTS, steps=0, dtype="float64")
    assert report.ok, report.to_table()
    np.testing.assert_array_equal(seen[0], [1.0, 2.0, 3.0])


def test_assert_parity_fails_with_the_table_and_returns_the_report_when_ok():
    with pytest.raises(AssertionError) as err:
        assert_parity(legacy_linear, eager_linear, OLD_WEIGHTS, INPUTS, name_map={}, steps=0)
    assert "rung" in str(err.value) and "FAIL" in str(err.value) and "new/w" in str(err.value)
    report = assert_parity(legacy_linear, eager_linear, OLD_WEIGHTS, INPUTS, name_map=NAME_MAP,
                           steps=1, dtype="float64")
    assert report.ok
    data = json.loads(report.to_json())
    assert data["ok"] and len(data["rows"]) == len(report.rows)


def test_a_json_report_is_standard_json_where_a_row_could_not_be_compared():
    # A row that could not be compared holds inf; standard JSON has no Infinity, so strict
    # parsers would reject the whole report: it is null there.
    report = ParityReport([Row("weights", "train step", float("inf"), float("inf"), False,
                               "the TF2 train step raised"),
                           Row("loss", "loss", 1e-3, 2e-3, False)])
    text = report.to_json()
    assert "Infinity" not in text and "NaN" not in text
    rows = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}"))["rows"]
    assert (rows[0]["max_abs"], rows[0]["max_rel"]) == (None, None)
    assert (rows[1]["max_abs"], rows[1]["max_rel"]) == (1e-3, 2e-3)


def test_a_first_failure_that_says_nothing_takes_the_first_later_cause_into_the_summary():
    # a double softmax: the outputs part with no hint, the loss rung names the cause
    report = ParityReport([Row("outputs", "probs", 0.1, 0.12, False),
                           Row("loss", "loss", 0.3, 0.2, False, "softmax applied twice"),
                           Row("gradients", "w", 0.1, 0.1, False, "follows")])
    assert report.summary() == ("parity FAILED at rung 'outputs', item 'probs': max abs 0.1, "
                                "max rel 0.12 (loss 'loss' says: softmax applied twice)")
    report.rows[0] = Row("outputs", "probs", 0.1, 0.12, False, "its own cause")
    assert report.summary().endswith("(its own cause)")
    # a later row that only says it follows from an earlier rung is no cause to borrow
    from pgtwin.parity.weights_rung import FOLLOWS_EARLIER
    consequence = ParityReport(rows=[Row("gradients", "w", 0.1, 0.12, False, ""),
                                     Row("weights", "w", 0.3, 0.2, False, FOLLOWS_EARLIER)])
    assert consequence.summary() == ("parity FAILED at rung 'gradients', item 'w': max abs "
                                     "0.1, max rel 0.12")


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": -1}, "steps must be an int >= 0"),
    ({"dtype": "float16"}, "dtype must be None"),
    ({"optimizer": ("rmsprop", {})}, "'rmsprop' is not 'adam' or 'sgd'"),
    ({"optimizer": ("adam", {"lr": 0.1})}, "unknown keys ['lr']"),
    ({"optimizer": "adam"}, "optimizer must be a spec"),
])
def test_bad_arguments_raise_naming_the_value(kwargs, message):
    with pytest.raises(ValueError) as err:
        run(**kwargs)
    assert message in str(err.value)


def test_bad_inputs_and_results_raise_naming_the_value():
    with pytest.raises(ValueError, match="inputs must be a non-empty dict"):
        compare(legacy_linear, eager_linear, OLD_WEIGHTS, {})
    with pytest.raises(ValueError, match=r"weights\['b'\] holds non-finite"):
        run(weights={**OLD_WEIGHTS, "b": np.array(np.nan)})
    with pytest.raises(ValueError, match="legacy_build returned a dict without a 'loss' key"):
        run(legacy_build=lambda ph: {"pred": legacy_linear(ph)["pred"]})


def test_the_weights_atol_is_capped_by_each_steps_size_as_in_pgtwin_compare():
    # Small weights (~0.01), a loss scaled by 1e-5 and plain SGD at lr 1: a step of about
    # 3e-5 per weight. The TF2 loss adds 9e-7 * sum(w), so its gradient is 9e-7 larger:
    # under the gradients rung's float32 atol (1e-6), and 9e-7 on the weights after one
    # step, about 3 % of the step. A fixed atol of 1e-4 passes that; capped at 1 % of the
    # step (3e-7, plus rtol 1e-5 x 0.02) it fails.
    def legacy(ph):
        out = legacy_linear(ph)
        return {**out, "loss": 1e-5 * out["loss"]}

    def eager(v, inp):
        out = eager_linear(v, inp)
        return {**out, "loss": 1e-5 * out["loss"] + 9e-7 * tf.reduce_sum(v["new/w"])}

    small = {"old_scope/w": np.array([0.005, -0.01, 0.02]), "b": np.array(0.0025)}
    kw = dict(weights=small, dtype="float32", steps=1, optimizer=("sgd", {"learning_rate": 1.0}))
    bad = run(eager, legacy, **kw)
    assert [r.rung for r in bad.rows if not r.ok] == ["weights"], bad.to_table()
    assert bad.first_failure.item == "old_scope/w"
    assert run(eager, legacy, atol=1e-4, **kw).ok  # an atol given is used as given


def test_common_factor_finds_c_where_all_of_b_is_c_times_a():
    from pgtwin.parity.ladder import common_factor
    a = np.array([1.0, -2.0, 3.0])
    assert common_factor(a, 2.5 * a, 1e-6) == pytest.approx(2.5)
    # a residual of 0.01 against |b| = 9.35: within 1e-2 of it, not within 1e-4
    off = 2.5 * a + np.array([0.01, 0.0, 0.0])
    assert common_factor(a, off, 1e-2) is not None and common_factor(a, off, 1e-4) is None
    assert common_factor(a, off, 1e-4, slack=0.02) is not None  # the arrays' own rounding
    assert common_factor(np.zeros(3), a, 1.0) is None and common_factor(a, np.zeros(3), 1.0) is None
    assert common_factor(a, np.array([np.inf, 0.0, 0.0]), 1.0) is None
