"""A port that flattens a conv map channels first: its outputs part with the cause named
by a replay with the dense kernel's rows reordered (pgtwin.parity.flatten_order)."""
from __future__ import annotations

import re

import keras
import numpy as np
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.flatten_order import channels_first_rows
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class TinyConvNet:
    """TF1: a 2 x 2 conv (3 filters, 'VALID') on 4 x 4 x 1 observations, the 3 x 3 x 3 map
    reshaped to 27 features, a dense layer to 2 logits; loss mean(logits^2 * ret)."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 4, 4, 1], name="obs")
        self.ret = tf1.placeholder(tf.float32, [None], name="ret")
        conv = tf1.get_variable("conv/kernel", [2, 2, 1, 3])
        fc = tf1.get_variable("fc/kernel", [27, 2])
        features = tf.nn.relu(tf.nn.conv2d(self.obs, conv, 1, "VALID"))
        self.logits = tf.matmul(tf.reshape(features, [-1, 27]), fc)
        self.loss = tf.reduce_mean(tf.reduce_sum(self.logits ** 2, 1) * self.ret)


class KerasConvNet:
    def __init__(self, channels_first: bool):
        layers = [keras.Input((4, 4, 1)), keras.layers.Conv2D(3, 2, use_bias=False,
                                                               activation="relu", name="conv")]
        if channels_first:  # flattened as a PyTorch reference does
            layers.append(keras.layers.Permute((3, 1, 2)))
        layers += [keras.layers.Flatten(), keras.layers.Dense(2, use_bias=False, name="fc")]
        self.model = keras.Sequential(layers)

    def loss(self, batch):
        logits = self.model(tf.cast(batch["obs"], tf.float32))
        ret = tf.cast(batch["ret"], tf.float32)
        return {"loss": tf.reduce_mean(tf.reduce_sum(logits ** 2, 1) * ret), "logits": logits}


def _compare(channels_first: bool):
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(8, 4, 4, 1)), "ret": rng.normal(size=8)}
    tf1_program = TF1Program(build=TinyConvNet, feeds={"obs": "obs", "ret": "ret"},
                             loss="loss", outputs={"logits": "logits"})
    tf2_program = TF2Program(build=lambda: KerasConvNet(channels_first),
                             loss=lambda agent, b: agent.loss(b), model="model")
    return compare_programs(tf1_program, tf2_program, batch, steps=0)


def test_the_rows_put_in_channels_first_order_by_hand():
    # h = w = 2, c = 2: TF1's row (h, w, c) is index (h * 2 + w) * 2 + c; a channels-first
    # flatten's row (c, h, w) is c * 4 + h * 2 + w. TF1's rows 0..7 are (0,0,0) (0,0,1)
    # (0,1,0) (0,1,1) (1,0,0) (1,0,1) (1,1,0) (1,1,1), so the channels-first rows are
    # TF1's rows 0, 2, 4, 6 (channel 0), then 1, 3, 5, 7 (channel 1).
    kernel = np.arange(8.0)[:, None]
    assert channels_first_rows(kernel, (2, 2, 2))[:, 0].tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_a_channels_first_flatten_is_named_at_the_outputs():
    report = _compare(channels_first=True)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "logits"), report.to_table()
    # Keras numbers its models per process (sequential_3/fc/kernel)
    assert re.match(r"the TF2 side flattens the 3 x 3 x 3 feature map before \S*fc/kernel "
                    r"channels first: with fc/kernel's rows put in \(channels, height, "
                    r"width\) order, every output agrees", bad.note), bad.note


def test_the_channels_last_port_passes():
    report = _compare(channels_first=False)
    assert report.ok, report.to_table()
