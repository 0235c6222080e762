"""A TF1 program written against ``tf.contrib`` (gone in TensorFlow 2), for the CLI's
explanation of old code (``tf_slim`` is where its layers live on)."""
from __future__ import annotations

import tensorflow as tf

from pgtwin.parity.programs import TF1Program

v1 = tf.compat.v1


def _build():
    x = v1.placeholder(tf.float32, [None, 4], name="obs")
    v1.contrib.layers.fully_connected(x, 2)


def tf1(dtype: str = "float32") -> TF1Program:
    return TF1Program(build=_build, feeds={"obs": "obs"}, loss="loss")
