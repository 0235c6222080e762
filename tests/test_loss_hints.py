"""The loss rung's term hint and the outputs rung's constant offset
(pgtwin.parity.loss_hints, pgtwin.parity.parity_rows), against gaps made by hand."""
from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.loss_hints import (batch_counts, count_ratio, loss_terms, regularization_hint,
                                      term_hint)
from pgtwin.parity.parity_rows import output_rows

tf1 = tf.compat.v1


def _actor_critic(dtype, values=(1.5, 4.0, 0.7)):
    """A TF1 loss pg + 0.5 vf - 0.01 ent over three scalar terms, its Session and feed:
    pg = 1.5, vf = 4.0, ent = 0.7 (fed), so the loss is 1.5 + 2.0 - 0.007 = 3.493. ``obj``:
    the script's globals, which hold the value term as ``v_loss``."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf1.placeholder(dtype, [3], name="terms")
        pg, vf, ent = (tf.identity(x[i], name=n) for i, n in enumerate(("pg", "vf", "ent")))
        loss = pg + 0.5 * vf - 0.01 * ent
    session = tf1.Session(graph=graph)
    return SimpleNamespace(loss=loss, session=session, feed={x: np.array(values)},
                           obj={"v_loss": vf, "loss": loss})


@pytest.fixture(scope="module")
def actor_critic():
    program = _actor_critic(tf.float64)
    yield program
    program.session.close()


def test_the_loss_is_read_as_its_terms_with_their_coefficients(actor_critic):
    got = [(c, t.op.name) for c, t in loss_terms(actor_critic.loss)]
    assert got == [(1.0, "pg"), (0.5, "vf"), (-0.01, "ent")]


@pytest.mark.parametrize("tf2_loss,want", [
    # the value loss weighted 1.0: 1.5 + 4.0 - 0.007 = 5.493
    (5.493, "the TF2 loss weights TF1's term v_loss (vf) (4) 1 where TF1 weights it 0.5: "
            "counted twice, or its coefficient doubled"),
    # the entropy bonus left out: 3.5
    (3.5, "the TF2 loss weights TF1's term ent (0.7) 0 where TF1 weights it -0.01: a term "
          "left out of the TF2 loss"),
    # the value loss weighted 0.25: 1.5 + 1.0 - 0.007 = 2.493
    (2.493, "the TF2 loss weights TF1's term v_loss (vf) (4) 0.25 where TF1 weights it 0.5: "
            "halved"),
    # the value loss weighted 0.3: 1.5 + 1.2 - 0.007 = 2.693
    (2.693, "the TF2 loss weights TF1's term v_loss (vf) (4) 0.3 where TF1 weights it 0.5: "
            "a coefficient differs"),
    # a gap no one term explains with a round coefficient (3.493 + 0.1234567)
    (3.6164567, ""),
])
def test_a_gap_one_terms_coefficient_explains_is_named(actor_critic, tf2_loss, want):
    assert term_hint(actor_critic, 3.493, tf2_loss, 1e-9) == want


def test_a_gap_two_terms_explain_names_both():
    # pg = 0.014, vf = 4, ent = 1.4: loss 0.014 + 2 - 0.014 = 2.0. A TF2 loss of 1.986
    # (gap -0.014) is pg left out (1 - 0.014 / 0.014 = 0) or the entropy weighted
    # -0.02 (-0.01 - 0.014 / 1.4): the loss cannot tell which
    program = _actor_critic(tf.float64, (0.014, 4.0, 1.4))
    try:
        assert term_hint(program, 2.0, 1.986, 1e-9) == (
            "the gap fits more than one term's coefficient changed, so the loss alone cannot "
            "tell which (add the terms to both sides' outputs to see): the TF2 loss weights "
            "TF1's term pg (0.014) 0 where TF1 weights it 1: a term left out of the TF2 loss, "
            "or TF1's term ent (1.4) -0.02 where TF1 weights it -0.01: counted twice, or its "
            "coefficient doubled")
    finally:
        program.session.close()


def test_a_flipped_sign_is_named_in_float32_too():
    # 0.01 in float32 reads back as 0.009999999776; the entropy bonus added where TF1
    # subtracts it: 1.5 + 2.0 + 0.007 = 3.507
    program = _actor_critic(tf.float32)
    try:
        assert term_hint(program, 3.493, 3.507, 1e-6) == (
            "the TF2 loss weights TF1's term ent (0.7) 0.01 where TF1 weights it -0.01: its "
            "sign flipped")
    finally:
        program.session.close()


def test_an_output_a_constant_apart_is_named_with_the_gaussian_constant():
    # a hand-written Gaussian log-prob without -0.5 log(2 pi) per dimension (2 dimensions)
    rng = np.random.default_rng(0)
    logp = rng.normal(size=16)
    [row] = output_rows({"logp": logp}, {"logp": logp + np.log(2 * np.pi)}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert not row.ok and row.note == (
        "TF2Program's 'logp' is TF1Program's + 1.838, all of it: a constant term on one side "
        "only (1.838 is 2 x 0.5 log(2 pi), the Gaussian log-density's constant per action "
        "dimension)")
    [minus] = output_rows({"logp": logp}, {"logp": logp - 0.5 * np.log(2 * np.pi)}, 1e-5,
                          1e-6, "", sides=("TF1Program", "TF2Program"))
    assert minus.note.startswith("TF2Program's 'logp' is TF1Program's - 0.9189, all of it: a "
                                 "constant term on one side only (0.9189 is 1 x 0.5 log(2 pi)")


def test_the_tensors_a_train_op_minimises_are_read_under_any_scope():
    from pgtwin.parity.loss_hints import minimised_tensors
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        w = tf1.get_variable("w", [3])
        with tf1.name_scope("losses"):
            pg = tf.reduce_sum(tf.square(w))
            loss = pg - 0.1 * tf.reduce_sum(w)
        with tf1.name_scope("train"):
            train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        assert [t.name for t in minimised_tensors(train_op)] == [loss.name]
        assert minimised_tensors(None) == []


@pytest.mark.parametrize("ddof_on,want", [
    ("TF2", "is 0.9874x TF1Program's, all of it: sqrt(39/40), Bessel's correction over its "
            "40 values"),
    ("TF1", "is 1.013x TF1Program's, all of it: sqrt(39/40) inverted, Bessel's correction "
            "over its 40 values"),
])
def test_returns_normalised_by_a_std_with_ddof_1_on_one_side_are_named_bessel(ddof_on, want):
    # (r - mean) / std with ddof 0 against ddof 1 over n = 40: std_1 = std_0 sqrt(40/39),
    # so the ddof-1 side's returns are sqrt(39/40) = 0.98742 times the other's
    r = np.random.default_rng(1).normal(size=40)
    ddof0, ddof1 = ((r - r.mean()) / r.std(ddof=d) for d in (0, 1))
    tf1_out, tf2_out = (ddof1, ddof0) if ddof_on == "TF1" else (ddof0, ddof1)
    [row] = output_rows({"returns": tf1_out}, {"returns": tf2_out}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert not row.ok and row.note.startswith(f"TF2Program's 'returns' {want}")
    assert "ddof=1" in row.note


def test_a_scale_that_is_no_bessel_correction_stays_the_scale_note():
    r = np.random.default_rng(1).normal(size=40)
    [row] = output_rows({"x": r}, {"x": r * 0.9}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert "0.9x TF1Program's, all of it: an input scaled on one side only" in row.note


def test_a_loss_gap_no_hint_explains_prints_the_digits_that_differ_and_where_to_look():
    # float64: a TF2 loss 1e-9 relative above TF1's, outputs (the logits) equal. Six
    # significant digits print both the same; the row prints as many as tell them apart.
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF2Program
    from tests import user_programs as up
    base = up.tf2_program("float64")

    def loss(agent, batch):
        out = base.loss(agent, batch)
        return {**out, "loss": out["loss"] * (1 + 1e-9)}
    program = TF2Program(build=base.build, loss=loss, model="model")
    report = compare_programs(up.tf1_program("float64"), program, up.make_batch(), steps=0)
    row = report.first_failure
    assert row.rung == "loss", report.to_table()
    a, b = (float(x) for x in re.findall(r"TF1 loss (\S+), TF2 loss (\S+)\. The outputs",
                                         row.note)[0])
    assert a != b and abs(b / a - 1) < 1e-8  # the printed digits tell them apart, no more
    assert "The outputs agree (logits), so the gap is in what each loss computes" in row.note


@pytest.mark.parametrize("factor,want", [
    # a log-probability averaged over 2 action heads where TF1 sums them: 0.5x
    (0.5, "is 0.5x TF1Program's, all of it (1/2): a mean over 2 values where TF1Program "
          "sums them"),
    # TF1 averages over 3 dimensions, the port sums: 3x
    (3.0, "is 3x TF1Program's, all of it (3): a mean over 3 values where TF2Program sums "
          "them"),
])
def test_an_output_a_whole_count_apart_is_told_as_a_mean_against_a_sum(factor, want):
    logp = np.random.default_rng(2).normal(size=16)
    [row] = output_rows({"logp": logp}, {"logp": logp * factor}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert row.note.startswith(f"TF2Program's 'logp' {want}")


def test_an_output_that_parts_past_agreeing_ones_says_where_and_the_summary_borrows_no_values():
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.ladder import ParityReport, Row
    from pgtwin.parity.programs import TF2Program
    from tests import user_programs as up
    # TF1 names its loss as an output too; the port returns it 1.37x (a scalar: no factor
    # can be read from one number), its logits equal
    base = up.tf2_program()

    def loss(agent, batch):
        out = base.loss(agent, batch)
        return {**out, "pi_loss": out["loss"] * 1.37}
    tf1_program = dataclasses.replace(up.tf1_program(),
                                      outputs={"logits": "logits", "pi_loss": "loss"})
    report = compare_programs(tf1_program, TF2Program(build=base.build, loss=loss,
                                                      model="model"), up.make_batch(), steps=0)
    row = report.first_failure
    assert (row.rung, row.item) == ("outputs", "pi_loss"), report.to_table()
    assert row.note.startswith("'pi_loss' parts where 'logits' agree: the code that computes "
                               "'pi_loss' differs past what it shares with those")
    # a failing row without a note borrows no later row's bare loss values
    bare = ParityReport(rows=[Row("outputs", "x", 1.0, 1.0, False, ""),
                              Row("loss", "loss", 1.0, 1.0, False, "TF1 loss 1, TF2 loss 2")])
    assert "says" not in bare.summary() and "TF1 loss" not in bare.summary()


def test_gradients_that_part_after_the_forward_pass_parted_say_they_follow_from_it():
    from pgtwin.parity.parity_rows import DETACHED, gradient_rows
    g = {"w": np.ones(3)}
    [after_forward] = gradient_rows(g, {"w": 2 * np.ones(3)}, 1e-6, 1e-8, "", forward_ok=False)
    assert not after_forward.ok and after_forward.note.startswith(
        "follows from the outputs or loss that parted above")
    [detached] = gradient_rows(g, {"w": 2 * np.ones(3)}, 1e-6, 1e-8, "", forward_ok=True)
    assert detached.note == DETACHED


def test_a_tf2_loss_computed_in_float32_in_a_float64_comparison_is_named_with_floatx():
    # A float64 port whose loss comes back float32 (a compiled Keras loss under floatx
    # float32): its rounding (about 6e-8 relative) parts from TF1's float64 loss.
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF2Program
    from tests import user_programs as up
    base = up.tf2_program("float64")

    def loss(agent, batch):
        out = base.loss(agent, batch)
        return {**out, "loss": tf.cast(out["loss"], tf.float32)}
    report = compare_programs(up.tf1_program("float64"),
                              TF2Program(build=base.build, loss=loss, model="model"),
                              up.make_batch(), steps=0)
    row = report.first_failure
    assert row.rung == "loss", report.to_table()
    assert row.note.startswith("the TF2 loss is float32 where TF1's is float64: it was computed "
                               "in float32")
    assert "keras.config.set_floatx('float64')" in row.note


def _l2_program(regularizer):
    """A TF1 loss pg + regularizer(w), pg = 1.0 fed, the variable w = [[1, 2], [3, 4]]:
    sum(w^2) = 30, so tf.nn.l2_loss(w) = 15."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        pg = tf1.placeholder(tf.float32, [], name="pg")
        w = tf1.get_variable("w", initializer=tf.constant([[1.0, 2.0], [3.0, 4.0]]))
        reg = regularizer(w)
        tf1.add_to_collection(tf1.GraphKeys.REGULARIZATION_LOSSES, reg)
        loss = pg + reg
        init = tf1.global_variables_initializer()
    session = tf1.Session(graph=graph)
    session.run(init)
    return SimpleNamespace(loss=loss, session=session, graph=graph, feed={pg: 1.0}, obj={})


def test_an_l2_loss_term_doubled_in_float32_is_named_with_keras_l2s_factor():
    # TF1: pg + 1e-4 * l2_loss(w) = 1 + 1.5e-3; a Keras L2(1e-4) port adds 1e-4 * 30 = 3e-3.
    # The coefficient read from the gap is 2e-4 within tol = 1e-5 * 1.003 / 15 = 6.7e-7,
    # which no two-digit rounding gate at 1e-3 of 2e-4 (2e-7) let through
    program = _l2_program(lambda w: 1e-4 * tf.nn.l2_loss(w))
    try:
        note = term_hint(program, 1.0015, 1.003, 1e-5)
    finally:
        program.session.close()
    assert note.startswith("the TF2 loss weights TF1's term L2Loss (15) 0.0002 where TF1 "
                           "weights it 0.0001: counted twice, or its coefficient doubled (TF1's "
                           "term is tf.nn.l2_loss, sum(w^2) / 2, and Keras' L2(s) regularizer "
                           "is s * sum(w^2)"), note


def test_half_of_tf1s_keras_style_regularization_loss_is_named():
    # TF1: pg + 1e-3 * sum(w^2) = 1 + 0.03 (tf.keras.regularizers.l2); the port's
    # 1e-3 * l2_loss(w) = 0.015: the TF2 loss is TF1's less half its regularization loss
    program = _l2_program(lambda w: tf.multiply(1e-3, tf.reduce_sum(tf.square(w)), name="l2"))
    try:
        note = regularization_hint(program, 1.03, 1.015)
    finally:
        program.session.close()
    assert note.startswith("the TF2 loss holds half of TF1's regularization loss (0.03: l2): "
                           "TF1's regularizer is s * sum(w ** 2)"), note


def test_the_batchs_counts_by_hand():
    # 6 rows; adv has 5 nonzero entries, mask 4 (the last 2 steps padded); adv * mask 3
    fed = {"obs": np.zeros((6, 2)), "adv": np.array([1.0, 0.0, 2.0, 3.0, 4.0, 5.0]),
           "mask": np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])}
    assert batch_counts(fed) == {6: "the rows of inputs['obs'], the rows of inputs['adv'], ...",
                                 5: "the nonzero entries of inputs['adv']",
                                 4: "the nonzero entries of inputs['mask']",
                                 3: "the rows where inputs['adv'] and inputs['mask'] are both "
                                    "nonzero"}
    counts = batch_counts(fed)
    assert count_ratio(3 / 6, counts, 1e-9) == (3, 6)
    assert count_ratio(0.77, counts, 1e-9) is None
    # 4/6 and 6/9 would both be 2/3: where two quotients fit, none is told
    assert count_ratio(2 / 3, {4: "a", 6: "b", 9: "c"}, 1e-9) is None


class MaskedLosses:
    """TF1 code on tf.compat.v1.losses: pg = sparse_softmax_cross_entropy(weights=adv *
    mask), whose default reduction divides by the nonzero weights."""

    def __init__(self, dtype=tf.float32):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(dtype, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.adv = tf1.placeholder(dtype, [None], name="adv")
        self.mask = tf1.placeholder(dtype, [None], name="mask")
        w = tf1.get_variable("pi/kernel", [3, 2], dtype)
        self.logits = tf.matmul(self.obs, w)
        self.pg = tf1.losses.sparse_softmax_cross_entropy(self.act, self.logits,
                                                          weights=self.adv * self.mask)


def test_a_mean_over_all_rows_where_tf1s_losses_divide_by_the_nonzero_weights_is_named():
    # 8 rows, the last 2 padded (mask 0): TF1 divides the weighted sum by 6, a port that
    # takes the mean over the rows by 8, so its pg is TF1's x 6/8
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF1Program, TF2Program
    rng = np.random.default_rng(4)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8),
             "adv": rng.normal(size=8) + 3.0, "mask": np.array([1.0] * 6 + [0.0] * 2)}
    kernel = keras.layers.Dense(2, use_bias=False, name="pi")

    def loss(agent, b):
        logits = agent(tf.cast(b["obs"], tf.float32))
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        pg = tf.reduce_mean(ce * tf.cast(b["adv"] * b["mask"], tf.float32))
        return {"loss": pg, "logits": logits, "pg": pg}
    tf1_program = TF1Program(build=MaskedLosses, loss="pg", outputs={"pg": "pg",
                                                                     "logits": "logits"},
                             feeds={k: k for k in batch})
    report = compare_programs(tf1_program, TF2Program(build=lambda: kernel, loss=loss), batch,
                              steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "pg"), report.to_table()
    assert bad.note.startswith(
        "TF2Program's 'pg' is TF1Program's x 6/8: TF1's divides by 6 (the nonzero entries of "
        "inputs['mask']"), bad.note
    assert "(Reduction.SUM_BY_NONZERO_WEIGHTS)" in bad.note


def test_tf1_losses_float32_rounding_in_a_float64_graph_is_named_not_blamed_on_the_port():
    # tf.compat.v1.losses cast the losses and weights to float32 and back: a faithful
    # float64 port parts by float32 rounding (about 1e-7 relative)
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF1Program, TF2Program
    rng = np.random.default_rng(4)
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8),
             "adv": rng.normal(size=8) + 3.0, "mask": np.array([1.0] * 6 + [0.0] * 2)}
    kernel = keras.layers.Dense(2, use_bias=False, name="pi", dtype="float64")

    def loss(agent, b):
        logits = agent(b["obs"])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        weights = b["adv"] * b["mask"]
        pg = tf.reduce_sum(ce * weights) / tf.cast(tf.math.count_nonzero(weights), tf.float64)
        return {"loss": pg, "logits": logits, "pg": pg}
    tf1_program = TF1Program(build=lambda: MaskedLosses(tf.float64), loss="pg",
                             outputs={"pg": "pg", "logits": "logits"},
                             feeds={k: k for k in batch})
    report = compare_programs(tf1_program, TF2Program(build=lambda: kernel, loss=loss), batch,
                              steps=0)
    # the rows through TF1's casts pass, the rounding named (before, a faithful port
    # failed at the loss rung with this note); the logits, before the casts, are exact
    assert report.ok, report.to_table()
    rows = {r.item: r for r in report.rows}
    assert 0 < rows["pg"].max_rel < 1e-5 and rows["pg"].note.startswith(
        "TF1's graph rounds float64 to float32 on the way (sparse_softmax_cross_entropy_loss/"
    ), rows["pg"].note
    assert rows["float32 rounding"].note.startswith("compared at float32 tolerance")
    assert rows["logits"].max_abs == 0.0


@pytest.mark.parametrize("zero_advantage", [False, True])
def test_a_batch_that_cannot_tell_nonzero_weights_from_the_mask_is_warned(zero_advantage):
    # TF1 divides by the nonzero entries of adv * mask: 6 of 8 rows where every advantage
    # is nonzero, which is also sum(mask), so a port dividing by sum(mask) would pass; with
    # one real row's advantage 0 the counts differ (5 against 6) and the batch tells them
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF1Program, TF2Program
    rng = np.random.default_rng(4)
    adv = rng.normal(size=8) + 3.0
    if zero_advantage:
        adv[2] = 0.0
    batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8), "adv": adv,
             "mask": np.array([1.0] * 6 + [0.0] * 2)}
    kernel = keras.layers.Dense(2, use_bias=False, name="pi")

    def loss(agent, b):
        logits = agent(tf.cast(b["obs"], tf.float32))
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        weights = tf.cast(b["adv"] * b["mask"], tf.float32)
        pg = tf.reduce_sum(ce * weights) / tf.cast(tf.math.count_nonzero(weights), tf.float32)
        return {"loss": pg, "logits": logits}
    report = compare_programs(TF1Program(build=MaskedLosses, loss="pg",
                                         outputs={"logits": "logits"},
                                         feeds={k: k for k in batch}),
                              TF2Program(build=lambda: kernel, loss=loss), batch, steps=0)
    assert report.ok, report.to_table()
    warned = [r for r in report.warnings if r.item == "nonzero weights"]
    if zero_advantage:
        assert not warned
    else:
        [row] = warned
        assert row.note.startswith("WARNING TF1's sparse_softmax_cross_entropy_loss divides by "
                                   "its nonzero weights, 6 on this batch, which is also the "
                                   "ones of inputs['mask']"), row.note


class MaskedValue:
    """TF1: vf = mean_squared_error(ret, v, weights=mask), v = obs @ w."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.ret = tf1.placeholder(tf.float32, [None], name="ret")
        self.mask = tf1.placeholder(tf.float32, [None], name="mask")
        self.v = tf.squeeze(tf.matmul(self.obs, tf1.get_variable("v/kernel", [3, 1])), 1)
        self.vf = tf1.losses.mean_squared_error(self.ret, self.v, weights=self.mask)


def test_an_output_the_tf2_side_computes_without_the_mask_is_named_by_a_replay():
    # the port's value loss averages the 2 padded steps too: TF1 run again with mask all
    # ones gives the port's value exactly
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF1Program, TF2Program
    rng = np.random.default_rng(5)
    batch = {"obs": rng.normal(size=(8, 3)), "ret": rng.normal(size=8),
             "mask": np.array([1.0] * 6 + [0.0] * 2)}
    kernel = keras.layers.Dense(1, use_bias=False, name="v")

    def loss(agent, b):
        v = tf.squeeze(agent(tf.cast(b["obs"], tf.float32)), 1)
        vf = tf.reduce_mean(tf.square(tf.cast(b["ret"], tf.float32) - v))
        return {"loss": vf, "v": v, "vf": vf}
    report = compare_programs(TF1Program(build=MaskedValue, loss="vf",
                                         outputs={"v": "v", "vf": "vf"},
                                         feeds={k: k for k in batch}),
                              TF2Program(build=lambda: kernel, loss=loss), batch, steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "vf"), report.to_table()
    assert bad.note.startswith("the TF2 'vf' is TF1's with inputs['mask'] all ones: the TF2 "
                               "side leaves 'mask' out of it"), bad.note
    assert bad.note.endswith("use 'mask' there as TF1 does")


def test_a_halved_term_that_reads_the_batch_is_no_regulariser():
    # a log-density squares (a - mu)^2 too; halved (a mean over 2 action dimensions where
    # TF1 sums) it got the L2 regularizer's fix. A term that reads a placeholder is no
    # penalty on the weights.
    program = _actor_critic(tf.float64)
    try:
        note = term_hint(program, 3.493, 3.493 - 0.75, 1e-9)  # pg 1.5 halved
    finally:
        program.session.close()
    assert note == "the TF2 loss weights TF1's term pg (1.5) 0.5 where TF1 weights it 1: halved"


@pytest.mark.parametrize("values,want", [
    # a scalar entropy without 0.5 log(2 pi e) = 1.4189 per dimension, 2 dimensions
    ((1.0, 1.0 - 2 * 0.5 * np.log(2 * np.pi * np.e)),
     "TF2Program's 'ent' is TF1Program's - 2.838, all of it: a constant term on one side "
     "only (2.838 is 2 x 0.5 log(2 pi e), the Gaussian entropy's constant per action "
     "dimension)"),
    # two arbitrary numbers: no known constant, no note
    ((1.0, 0.75), ""),
])
def test_a_scalar_a_gaussian_constant_apart_is_named(values, want):
    [row] = output_rows({"ent": np.array(values[0])}, {"ent": np.array(values[1])}, 1e-5, 1e-6,
                        "", sides=("TF1Program", "TF2Program"))
    assert not row.ok and row.note == want


def test_a_loss_gap_the_gradients_do_not_see_is_told_a_constant_term():
    # the port adds 0.7 to its loss: the loss rows part, every gradient agrees
    from pgtwin.parity.code_parity import CONSTANT_GAP, compare_programs
    from pgtwin.parity.programs import TF2Program
    from tests import user_programs as up
    base = up.tf2_program("float64")

    def loss(agent, batch):
        out = base.loss(agent, batch)
        return {**out, "loss": out["loss"] + 0.7}
    report = compare_programs(up.tf1_program("float64"),
                              TF2Program(build=base.build, loss=loss, model="model"),
                              up.make_batch(), steps=0)
    row = report.first_failure
    assert row.rung == "loss" and row.note.endswith(CONSTANT_GAP), report.to_table()
    assert all(r.ok for r in report.rows if r.rung == "gradients")


@pytest.mark.parametrize("normalised_on", ["TF1", "TF2"])
@pytest.mark.parametrize("eps", [0.0, 1e-8])
def test_returns_standardised_on_one_side_only_are_named(normalised_on, eps):
    # r standardised by hand, (r - mean) / (std + eps) with numpy, against r itself: the
    # side that normalises is named, the other is told to add it (or both to drop it)
    r = np.random.default_rng(2).normal(3.0, 5.0, size=24)
    z = (r - r.mean()) / (r.std() + eps)
    tf1_out, tf2_out = (z, r) if normalised_on == "TF1" else (r, z)
    [row] = output_rows({"returns": tf1_out}, {"returns": tf2_out}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    other = "TF2" if normalised_on == "TF1" else "TF1"
    assert not row.ok and row.note == (
        f"{normalised_on}Program's 'returns' are {other}Program's standardised ((x - mean) / "
        f"std over its 24 values: mean 0, std 1): {other}Program leaves the normalisation "
        "out. Normalise on both sides (the same mean, std and epsilon) or on neither")


def test_returns_standardised_with_ddof_1_say_so_and_an_affine_change_is_not_standardising():
    r = np.random.default_rng(3).normal(1.0, 2.0, size=10)
    z1 = (r - r.mean()) / r.std(ddof=1)  # std of z1 (ddof 0) is sqrt(9/10)
    [row] = output_rows({"returns": z1}, {"returns": r}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert "(x - mean) / std over its 10 values: mean 0, std 1 with ddof=1)" in row.note
    # 2 r - 1: an affine change, but std 4 and mean 1, so no standardisation
    [other] = output_rows({"returns": r}, {"returns": 2 * r - 1}, 1e-5, 1e-6, "",
                          sides=("TF1Program", "TF2Program"))
    assert "standardised" not in other.note


def test_a_count_is_named_by_the_inputs_tf1_feeds_where_any_gives_it():
    # 48 nonzero entries in both 'adv' (fed to TF1) and 'returns' (the TF2 side's only):
    # TF1's divisor was named by 'returns' first, which TF1 never reads
    adv = np.array([1.0] * 48 + [0.0] * 16)
    fed = {"returns": adv * 2.0, "adv": adv}
    assert batch_counts(fed)[48] == ("the nonzero entries of inputs['returns'], the nonzero "
                                     "entries of inputs['adv']")
    assert batch_counts(fed, read={"adv"})[48] == "the nonzero entries of inputs['adv']"
    assert batch_counts(fed, read={"obs"})[48].startswith("the nonzero entries of "
                                                         "inputs['returns']")  # none read


class BigLossSmallBonus:
    """A float64 loss of about 800 (a sum over 400 rows) less 0.01 x a mean entropy of ~0.6:
    the bonus is under 1e-5 of the loss."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float64, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.adv = tf1.placeholder(tf.float64, [None], name="adv")
        logits = self.obs @ tf1.get_variable("pi/w", [3, 2], tf.float64)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act, logits=logits)
        p = tf.nn.softmax(logits)
        self.entropy = -tf.reduce_mean(tf.reduce_sum(p * tf.math.log(p), 1))
        self.loss = tf.reduce_sum(ce * self.adv) - 0.01 * self.entropy


def test_a_small_bonus_with_its_sign_flipped_is_named_in_float64():
    # 0.01 x ~0.6 on a loss of ~800: float32's 1e-6 floor on the coefficient's reading
    # (a tolerance of 1e-5 x 800 / 0.6 on it) hid it, as in a helper's A3C port; float64's
    # own rounding names it
    from pgtwin.parity.code_parity import compare_programs
    from pgtwin.parity.programs import TF1Program, TF2Program
    rng = np.random.default_rng(19)
    batch = {"obs": rng.normal(size=(400, 3)), "act": rng.integers(0, 2, 400),
             "adv": rng.normal(3.0, 1.0, size=400)}
    kernel = keras.layers.Dense(2, use_bias=False, name="pi", dtype="float64")

    def loss(agent, b):
        logits = agent(b["obs"])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        p = tf.nn.softmax(logits)
        entropy = -tf.reduce_mean(tf.reduce_sum(p * tf.math.log(p), 1))
        return {"loss": tf.reduce_sum(ce * b["adv"]) + 0.01 * entropy}
    report = compare_programs(TF1Program(build=BigLossSmallBonus, loss="loss",
                                         feeds={k: k for k in batch}),
                              TF2Program(build=lambda: kernel, loss=loss), batch, steps=0,
                              dtype="float64")
    [row] = [r for r in report.rows if r.item == "loss"]
    assert row.note.startswith("the TF2 loss weights TF1's term entropy (Neg) "), row.note
    assert row.note.endswith("0.01 where TF1 weights it -0.01: its sign flipped"), row.note
