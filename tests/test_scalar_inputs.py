"""A 0-d input TF1's loss reads (PPO2's annealed clip range) that the TF2 loss replaces by
a constant: found by halving it for one more forward pass (pgtwin.parity.scalar_inputs)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class Clipped:
    """The clipped surrogate, -mean(min(r A, clip(r, 1 - e, 1 + e) A)), e fed."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.adv = tf1.placeholder(tf.float32, [None], name="adv")
        self.old = tf1.placeholder(tf.float32, [None], name="old_logp")
        self.eps = tf1.placeholder(tf.float32, [], name="CLIPRANGE")
        logits = self.obs @ tf1.get_variable("pi/w", [3, 2])
        logp = -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act, logits=logits)
        ratio = tf.exp(logp - self.old)
        self.loss = -tf.reduce_mean(tf.minimum(
            ratio * self.adv, tf.clip_by_value(ratio, 1 - self.eps, 1 + self.eps) * self.adv))


def _batch():
    rng = np.random.default_rng(14)
    # old log-probs far from the policy's, so that many ratios fall outside [0.8, 1.2]
    return {"obs": rng.normal(size=(16, 3)), "act": rng.integers(0, 2, 16),
            "adv": rng.normal(size=16), "old_logp": rng.normal(-0.7, 0.5, size=16),
            "cliprange": np.float64(0.2)}


@pytest.mark.parametrize("reads_it", [True, False])
def test_a_clip_range_written_as_a_constant_is_named(reads_it):
    dense = keras.layers.Dense(2, use_bias=False, name="pi")

    def loss(agent, b):
        logits = agent(tf.cast(b["obs"], tf.float32))
        logp = -tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        ratio = tf.exp(logp - tf.cast(b["old_logp"], tf.float32))
        eps = tf.cast(b["cliprange"], tf.float32) if reads_it else 0.2
        adv = tf.cast(b["adv"], tf.float32)
        return {"loss": -tf.reduce_mean(tf.minimum(
            ratio * adv, tf.clip_by_value(ratio, 1 - eps, 1 + eps) * adv))}
    feeds = {"obs": "obs", "act": "act", "adv": "adv", "old_logp": "old_logp",
             "cliprange": "CLIPRANGE"}
    report = compare_programs(TF1Program(build=Clipped, loss="loss", feeds=feeds),
                              TF2Program(build=lambda: dense, loss=loss), _batch(), steps=0)
    rows = [r for r in report.rows if r.item == "input 'cliprange'"]
    if reads_it:
        assert report.ok and not rows, report.to_table()
        return
    [row] = rows
    assert not row.ok and row.note.startswith(
        "TF1's loss moves with inputs['cliprange'] (0.2 -> 0.1: "), row.note
    assert "and the TF2 loss does not: it does not read inputs['cliprange']" in row.note
    # the loss itself agrees on this batch: only the moved input tells
    assert [r for r in report.rows if r.item == "loss"][0].ok

