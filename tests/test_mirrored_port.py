"""A port whose model is built under ``tf.distribute.MirroredStrategy`` (two logical CPUs):
the harness loads TF1's weights into every replica (pgtwin.parity.tf2_side). Before, only
replica 0's copy took them, and a correct port parted at its first step. Run in a process
of its own: logical devices must be set before TensorFlow's runtime starts."""
from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = r'''
import json
import keras
import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1


class Policy:
    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        logits = self.obs @ tf1.get_variable("pi/w", [3, 2])
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.act, logits=logits))
        self.train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(self.loss)


class Mirrored:
    def __init__(self):
        self.strategy = tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices("CPU")][:2])
        with self.strategy.scope():
            self.model = keras.Sequential([keras.Input((3,)),
                                           keras.layers.Dense(2, use_bias=False)])
            self.optimizer = keras.optimizers.SGD(0.5)

    def loss(self, b):
        logits = self.model(tf.cast(b["obs"], tf.float32))
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits))

    def train_step(self, b):
        n = self.strategy.num_replicas_in_sync
        half = int(b["obs"].shape[0]) // n
        shards = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: {k: v[ctx.replica_id_in_sync_group * half:
                              (ctx.replica_id_in_sync_group + 1) * half] for k, v in b.items()})

        def step(shard):  # each replica's mean over its half, / n: the sum is the mean
            with tf.GradientTape() as tape:
                loss = self.loss(shard) / n
            variables = self.model.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.strategy.run(step, args=(shards,))


rng = np.random.default_rng(15)
batch = {"obs": rng.normal(size=(8, 3)), "act": rng.integers(0, 2, 8)}
report = compare_programs(
    TF1Program(build=Policy, loss="loss", train_op="train_op", feeds={"obs": "obs", "act": "act"}),
    TF2Program(build=Mirrored, loss=lambda a, b: {"loss": a.loss(b)},
               train_step=lambda a, b: a.train_step(b), model="model", optimizer="optimizer"),
    batch, steps=2)
print(json.dumps({"ok": report.ok, "table": report.to_table(),
                  "replicas": len(tf.config.list_logical_devices("CPU"))}))
'''


def test_a_mirrored_strategy_port_gets_tf1s_weights_in_every_replica():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["ok"], result["table"]
    assert "not compared" not in result["table"]
