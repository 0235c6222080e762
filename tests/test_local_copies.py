"""A3C's shape: the loss reads a worker's copy of the network, the train_op applies its
gradients to the global network, and a sync op copies the global weights back
(pgtwin.parity.local_copies, TF1Side.copies, convert-checkpoint)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.migrate.user_checkpoint import convert_user_checkpoint
from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1
OBS, HIDDEN, ACTIONS = 3, 5, 2


def _net(scope: str):
    """hidden (W, b) and a policy head W under ``scope``; created with get_variable."""
    with tf1.variable_scope(scope):
        return [tf1.get_variable("hidden/W", [OBS, HIDDEN]),
                tf1.get_variable("hidden/b", [HIDDEN], initializer=tf1.zeros_initializer()),
                tf1.get_variable("policy/W", [HIDDEN, ACTIONS])]


class A3C:
    """The global network, worker_0's copy with its loss (-sum log pi(a) * adv), gradients
    of the copy clipped by global norm 0.5 and applied to the global network by one Adam,
    and the sync op (worker <- global); the Session runs no sync after init, so the copy
    starts with other values than the global network."""

    def __init__(self, sync_at_build: bool = False):
        tf1.set_random_seed(0)
        self.global_vars = global_vars = _net("global")
        self.local = local = _net("worker_0")
        self.obs = tf1.placeholder(tf.float32, [None, OBS], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.adv = tf1.placeholder(tf.float32, [None], name="adv")
        w, b, p = local
        logits = tf.nn.relu(self.obs @ w + b) @ p
        logp = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.one_hot(self.act, ACTIONS), 1)
        self.loss = -tf.reduce_sum(logp * self.adv)
        grads, _ = tf.clip_by_global_norm(tf.gradients(self.loss, local), 0.5)
        trainer = tf1.train.AdamOptimizer(1e-2)
        with tf1.variable_scope("worker_0"):
            self.apply_grads = trainer.apply_gradients(zip(grads, global_vars))
        self.sync = tf.group(*[tf1.assign(l, g) for l, g in zip(local, global_vars)])
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())
        if sync_at_build:
            self.sess.run(self.sync)


def _batch():
    rng = np.random.default_rng(11)
    return {"obs": rng.normal(size=(16, OBS)), "act": rng.integers(0, ACTIONS, 16),
            "adv": rng.normal(size=16) * 4.0}


class Port(tf.Module):
    """One network, its loss, and Adam with the global-norm clip (``clip``: Keras' setting
    to give it, or 'global' for TF1's)."""

    def __init__(self, clip: str = "global"):
        super().__init__()
        self.model = keras.Sequential([keras.Input((OBS,)),
                                       keras.layers.Dense(HIDDEN, activation="relu"),
                                       keras.layers.Dense(ACTIONS, use_bias=False)])
        kw = {"global_clipnorm": 0.5} if clip == "global" else {"clipnorm": 0.5}
        self.optimizer = keras.optimizers.Adam(1e-2, epsilon=1e-8, **kw)

    def loss(self, b):
        logits = self.model(tf.cast(b["obs"], tf.float32))
        logp = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.one_hot(b["act"], ACTIONS), 1)
        return -tf.reduce_sum(logp * tf.cast(b["adv"], tf.float32))

    def train_step(self, b):
        with tf.GradientTape() as tape:
            loss = self.loss(b)
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))


def _tf1(**kw):
    return TF1Program(build=lambda: A3C(**kw), loss="loss", train_op="apply_grads",
                      feeds={"obs": "obs", "act": "act", "adv": "adv"})


def _tf2(clip: str = "global"):
    return TF2Program(build=lambda: Port(clip), loss=lambda a, b: {"loss": a.loss(b)},
                      train_step=lambda a, b: a.train_step(b), model="model",
                      optimizer="optimizer")


def test_a_faithful_port_of_an_a3c_worker_passes_its_steps_through_the_global_network():
    # Before: the steps' weights were the worker's, which the train_op never updates, so
    # no port could pass, and the optimizer looked unpaired
    report = compare_programs(_tf1(), _tf2(), _batch(), steps=3)
    assert report.ok, report.to_table()
    [row] = [r for r in report.rows if r.item == "local copies"]
    assert "global/hidden/W for worker_0/hidden/W" in row.note
    # the copy held its own initial values after build: said, as a warning
    assert row.note.startswith("WARNING ") and "run the sync op before each rollout" in row.note
    synced = compare_programs(TF1Program(build=lambda: A3C(sync_at_build=True), loss="loss",
                                         train_op="apply_grads",
                                         feeds={"obs": "obs", "act": "act", "adv": "adv"}),
                              _tf2(), _batch(), steps=1)
    assert not [r for r in synced.rows if r.item == "local copies"][0].note.startswith("WARN")


def test_clipping_each_gradient_by_its_own_norm_is_caught_in_an_a3c_worker():
    # the batch's gradients have a global norm well above 0.5: the two clips differ
    report = compare_programs(_tf1(), _tf2("each"), _batch(), steps=1)
    assert not report.ok
    bad = report.first_failure
    assert bad.item == "optimizer.clipnorm" and "use global_clipnorm=0.5" in bad.note, \
        report.to_table()


def test_a_var_list_of_the_global_network_is_refused_naming_the_copies():
    program = TF1Program(build=A3C, loss="loss", train_op="apply_grads",
                         feeds={"obs": "obs", "act": "act", "adv": "adv"},
                         var_list=["global/hidden/W", "global/hidden/b", "global/policy/W"])
    with pytest.raises(ValueError, match=r"TF1Program.var_list names variables the loss does "
                       r"not read: global/hidden/W \(the loss reads worker_0/hidden/W\)"):
        compare_programs(program, _tf2(), _batch(), steps=1)


def test_an_a3c_checkpoint_converts_the_global_weights_and_their_adam_state(tmp_path):
    # 3 steps of TF1 (train_op, then the sync as the worker's loop runs it), saved with a
    # plain Saver: the global network is 3 steps on, the worker's copy one sync behind the
    # global network's last step (synced before the 3rd step), and Adam's slots live
    # under worker_0/global/... (the optimizer was applied under worker_0's scope)
    batch = _batch()
    with tf.Graph().as_default():
        agent = A3C(sync_at_build=True)
        feed = {agent.obs: batch["obs"], agent.act: batch["act"], agent.adv: batch["adv"]}
        for _ in range(3):
            agent.sess.run(agent.apply_grads, feed)
        agent.sess.run(agent.sync)
        agent.sess.run(agent.apply_grads, feed)  # a 4th step, not synced: the copy is stale
        prefix = tf1.train.Saver().save(agent.sess, str(tmp_path / "a3c" / "model"))
        want, stale = agent.sess.run([agent.global_vars[1], agent.local[1]])
    assert not np.allclose(want, stale)
    result = convert_user_checkpoint(prefix, str(tmp_path / "tf2" / "ckpt"), _tf1(), _tf2(),
                                     batch)
    assert result.report.ok, result.report.to_table()
    port = Port()
    port.loss(batch)
    restore = tf.train.Checkpoint(model=port.model, optimizer=port.optimizer).restore(
        result.dst)
    port.optimizer.build(port.model.trainable_variables)
    restore.assert_consumed()
    np.testing.assert_array_equal(port.model.layers[0].bias.numpy(), want)
    assert int(port.optimizer.iterations.numpy()) == 4
    assert not [n for n in result.not_converted if n.startswith("global/")]
    assert any(n.startswith("the weights converted are the global network's") for n in
               result.notes)
