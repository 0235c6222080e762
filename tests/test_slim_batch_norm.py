"""Old code's ``tf_slim`` batch norm against a Keras migration (pgtwin compare).

The TF1 side is written as 2018 code was: ``slim.fully_connected`` with
``normalizer_fn=slim.batch_norm`` on an ``is_training`` placeholder (slim's defaults: decay
0.999, epsilon 1e-3, ``center=True``, ``scale=False``, updates in ``UPDATE_OPS``), and a
``train_op`` under ``tf.control_dependencies(UPDATE_OPS)``. It builds on TensorFlow 2.21
only because the harness puts back two names tf_slim 1.1 reads (``tf_patches.slim_names``).

Its faithful migration is a Keras ``Dense`` without bias, ``BatchNormalization(momentum=
0.999, epsilon=1e-3, scale=False)`` and ``ReLU``. Even so the moving variance parts: slim's
fused batch norm moves it with the unbiased batch variance, Keras with the biased one
(Bessel's correction over the batch's n = 32 rows), and the report says so.
"""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

slim = pytest.importorskip("tf_slim")  # in the test extra; a clear skip without it
tf1 = tf.compat.v1
OBS, HIDDEN, ACTIONS, LR = 4, 8, 2, 0.05


class SlimPolicy:
    """Old TF1 code: slim layers with batch norm, an is_training placeholder, SGD."""

    def __init__(self):
        self.obs = tf1.placeholder(tf.float32, [None, OBS], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.ret = tf1.placeholder(tf.float32, [None], name="ret")
        self.is_training = tf1.placeholder(tf.bool, [], name="is_training")
        h = slim.fully_connected(self.obs, HIDDEN, normalizer_fn=slim.batch_norm,
                                 normalizer_params={"is_training": self.is_training},
                                 scope="fc1")
        self.logits = slim.fully_connected(h, ACTIONS, activation_fn=None, scope="out")
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act,
                                                                 logits=self.logits)
        self.loss = tf.reduce_mean(neglogp * self.ret)
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            self.train_op = tf1.train.GradientDescentOptimizer(LR).minimize(self.loss)


class KerasPolicy:
    def __init__(self, momentum=0.999, epsilon=1e-3):
        self.model = keras.Sequential([
            keras.layers.Dense(HIDDEN, use_bias=False),
            keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon, scale=False),
            keras.layers.ReLU(), keras.layers.Dense(ACTIONS)])
        self.model.build((None, OBS))
        self.optimizer = keras.optimizers.SGD(LR)

    def loss(self, b):
        logits = self.model(b["obs"], training=bool(b["is_training"]))
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["act"],
                                                                 logits=logits)
        return {"loss": tf.reduce_mean(neglogp * b["ret"]), "logits": logits}

    def train_step(self, b):
        with tf.GradientTape() as tape:
            loss = self.loss(b)["loss"]
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))


TF1 = TF1Program(build=SlimPolicy, loss="loss", outputs={"logits": "logits"},
                 train_op="train_op", feeds={"obs": "obs", "act": "act", "ret": "ret",
                                             "is_training": "is_training"})


def tf2(**options) -> TF2Program:
    return TF2Program(build=lambda: KerasPolicy(**options), loss=lambda a, b: a.loss(b),
                      train_step=lambda a, b: a.train_step(b), model="model")


def batch(is_training: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"obs": rng.normal(1.0, 2.0, (32, OBS)), "act": rng.integers(0, ACTIONS, 32),
            "ret": rng.normal(size=32), "is_training": np.bool_(is_training)}


@pytest.fixture(autouse=True)
def _seeded_keras():
    keras.utils.set_random_seed(0)


def _state_rows(report, leaf):
    return [r for r in report.rows if r.rung == "weights" and r.item.endswith(leaf)]


def test_the_faithful_migration_parts_only_by_bessels_correction():
    report = compare_programs(TF1, tf2(), batch(), steps=1)
    bad = [r for r in report.rows if not r.ok]
    # everything else passes: pairing (beta with beta, no gamma), outputs, loss, the weights
    assert [r.item.rsplit("/", 1)[-1] for r in bad] == ["moving_variance"], report.to_table()
    assert "the unbiased batch variance (n / (n - 1), here n = 32 rows)" in bad[0].note
    assert all(r.ok for r in _state_rows(report, "moving_mean"))


def test_a_keras_momentum_left_at_099_is_read_from_the_updates_as_slims_0999():
    # slim's update is (1 - 0.999)(batch - m), Keras' (1 - 0.99)(batch - m): their ratio 0.1
    # gives TF1's momentum 1 - 0.1 x (1 - 0.99) = 0.999
    report = compare_programs(TF1, tf2(momentum=0.99), batch(), steps=1)
    mean = _state_rows(report, "moving_mean")[0]
    assert not mean.ok
    assert mean.note.startswith("TF1's update is that of momentum 0.999 (its decay), the Keras "
                                "layer's momentum is 0.99: build it with momentum=0.999")


def test_an_epsilon_inside_the_is_training_cond_is_found():
    # slim's batch norm on a placeholder builds a cond: its fused ops are in the branches
    report = compare_programs(TF1, tf2(epsilon=1e-5), batch(), steps=0)
    first = report.first_failure
    assert first.rung == "outputs", report.to_table()
    assert "TF1's graph adds 0.001 to the variance, the Keras BatchNormalization layers " \
           "1e-05" in first.note


def test_in_inference_mode_the_faithful_migration_passes():
    report = compare_programs(TF1, tf2(), batch(is_training=False), steps=0)
    assert report.ok, report.to_table()
