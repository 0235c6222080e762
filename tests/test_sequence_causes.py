"""Padded sequences: outputs that part only past each sequence's length (dynamic_rnn's zeros
against a masked Keras RNN's repeated last output), and a loss that divides by the padded
B x T where TF1 divides by the real steps (pgtwin.parity.row_causes, loss_hints)."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.ladder import compare_arrays
from pgtwin.parity.loss_hints import batch_counts
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.parity.row_causes import padded_step_note

tf1 = tf.compat.v1
LENGTHS = np.array([5, 3, 2, 1])  # 4 sequences padded to 5 steps: 11 real steps of 20


def _batch():
    rng = np.random.default_rng(8)
    return {"obs": rng.normal(size=(4, 5, 3)), "seq_len": LENGTHS,
            "returns": rng.normal(size=(4, 5)) * (np.arange(5) < LENGTHS[:, None])}


def test_counts_of_a_padded_batch_hold_its_entries_and_its_real_steps():
    counts = batch_counts(_batch())
    assert counts[20] == "the 4 x 5 entries of inputs['obs'], the 4 x 5 entries of " \
                         "inputs['returns']"
    # the sum of the lengths, 5 + 3 + 2 + 1, and the returns' nonzero entries (the same 11)
    assert counts[11] == "the nonzero entries of inputs['returns'], the steps " \
                         "inputs['seq_len'] counts (its sum)"


def _padded_outputs():
    rng = np.random.default_rng(9)
    real = np.arange(5)[None, :] < LENGTHS[:, None]
    out = rng.normal(size=(4, 5, 2))
    zeros = np.where(real[..., None], out, 0.0)  # dynamic_rnn's
    last = out[np.arange(4), LENGTHS - 1]  # a masked Keras RNN repeats the last output
    repeated = np.where(real[..., None], out, last[:, None, :])
    return zeros, repeated


def test_outputs_that_part_only_past_the_lengths_are_named_and_others_are_not():
    zeros, repeated = _padded_outputs()
    row = compare_arrays("outputs", "logits", zeros, repeated, 1e-5, 1e-6, "")
    assert padded_step_note(row, zeros, repeated, _batch()).startswith(
        "'logits' parts only at the padded steps, t >= inputs['seq_len'] (18 entries; the "
        "real steps agree)")  # 9 padded steps x 2 logits
    moved = repeated.copy()
    moved[1, 0, 0] += 1.0  # a real step parts too: no padded-step cause
    row = compare_arrays("outputs", "logits", zeros, moved, 1e-5, 1e-6, "")
    assert padded_step_note(row, zeros, moved, _batch()) == ""


class Recurrent:
    """TF1: h_t = tanh(x_t W + h_{t-1}) over 5 steps, zeroed past each length as
    dynamic_rnn's outputs are; loss = mean over the real steps of (h_t . 1) * return."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 5, 3], name="obs")
        self.seq_len = tf1.placeholder(tf.int32, [None], name="seq_len")
        self.returns = tf1.placeholder(tf.float32, [None, 5], name="returns")
        w = tf1.get_variable("cell/kernel", [3, 2])
        mask = tf.sequence_mask(self.seq_len, 5, dtype=tf.float32)
        h, outs = tf.zeros([tf.shape(self.obs)[0], 2]), []
        for t in range(5):
            h = tf.tanh(self.obs[:, t] @ w + h)
            outs.append(h)
        self.out = tf.stack(outs, 1) * mask[..., None]
        self.loss = tf.reduce_sum(tf.reduce_sum(self.out, -1) * self.returns * mask) \
            / tf.reduce_sum(mask)


def test_a_port_that_repeats_the_last_output_at_padded_steps_passes_with_a_warning():
    kernel = keras.layers.Dense(2, use_bias=False, name="cell")

    def loss(agent, b):
        x = tf.cast(b["obs"], tf.float32)
        h, outs = tf.zeros([4, 2]), []
        for t in range(5):
            h = tf.tanh(agent(x[:, t]) + h)
            outs.append(h)
        mask = tf.sequence_mask(b["seq_len"], 5)
        out, last = [], outs[0]
        for t in range(5):  # Keras' masked RNN: the last real output carried on
            last = tf.where(mask[:, t:t + 1], outs[t], last)
            out.append(last)
        out = tf.stack(out, 1)
        m = tf.cast(mask, tf.float32)
        return {"loss": tf.reduce_sum(tf.reduce_sum(out, -1) * tf.cast(b["returns"], tf.float32)
                                      * m) / tf.reduce_sum(m), "out": out}

    report = compare_programs(
        TF1Program(build=Recurrent, loss="loss", outputs={"out": "out"},
                   feeds={"obs": "obs", "seq_len": "seq_len", "returns": "returns"}),
        TF2Program(build=lambda: kernel, loss=loss), _batch(), steps=0)
    assert report.ok, report.to_table()
    [row] = [r for r in report.rows if r.item == "out"]
    assert row.note.startswith("WARNING 'out' parts only at the padded steps"), row.note
    assert "zero_output_for_mask=True" in row.note


def test_an_output_a_multiple_of_a_fed_input_apart_is_named():
    # a Fisher-vector product F t + 0.1 t on TF1's side and F t on the port's: the gap is
    # -0.1 x the fed tangent, all of it
    from pgtwin.parity.row_causes import input_multiple_note
    rng = np.random.default_rng(18)
    tangent, ft = rng.normal(size=(2, 7))
    tf1_fvp, tf2_fvp = ft + 0.1 * tangent, ft
    row = compare_arrays("outputs", "fvp", tf1_fvp, tf2_fvp, 1e-10, 1e-12, "")
    assert input_multiple_note(row, tf1_fvp, tf2_fvp, {"flat_tan": tangent}) == (
        "TF2's 'fvp' is TF1's - 0.1 x inputs['flat_tan'], all of it: a term 0.1 * "
        "inputs['flat_tan'] on one side only, or counted twice (a damping term such as "
        "cg_damping * tangent in a Fisher-vector product)")
    other = tf2_fvp + 0.01 * rng.normal(size=7)  # not a multiple of it
    row = compare_arrays("outputs", "fvp", tf1_fvp, other, 1e-10, 1e-12, "")
    assert input_multiple_note(row, tf1_fvp, other, {"flat_tan": tangent}) == ""
