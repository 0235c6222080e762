"""Optimizer settings read off a TF1 train_op's apply ops and off Keras' get_config, compared.

Expected values are the settings each optimizer was built with (written next to them).
"""
from __future__ import annotations

import keras
import pytest
import tensorflow as tf

from pgtwin.parity.optimizer_config import (RMSPROP_LEGACY_EPSILON, RMSPROP_START, drift_hint,
                                            float32_rounding, keras_optimizer, optimizer_rows,
                                            rounded_to_float32, tf1_optimizer)

tf1 = tf.compat.v1


def tf1_settings(make, feed_lr=None):
    """The (kind, settings) of ``make()``'s minimize op on a one-variable loss."""
    graph = tf.Graph()
    with graph.as_default():
        w = tf1.get_variable("w", [3], initializer=tf1.ones_initializer())
        lr = tf1.placeholder(tf.float32, [], name="lr") if feed_lr is not None else None
        train_op = make(lr).minimize(tf.reduce_sum(tf.square(w)))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return tf1_optimizer(train_op, sess, {lr: feed_lr} if lr is not None else None)


def test_tf1_adam_settings_come_from_its_apply_op():
    kind, s = tf1_settings(lambda _: tf1.train.AdamOptimizer(0.003, 0.8, 0.99, 1e-6))
    assert kind == "adam"
    # stored as float32 tensors in the graph
    assert s == {k: pytest.approx(v, rel=1e-7) for k, v in
                 {"learning_rate": 0.003, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-6,
                  "nesterov": 0.0}.items()}


def test_a_fed_learning_rate_placeholder_is_read_from_the_feed():
    kind, s = tf1_settings(lambda lr: tf1.train.GradientDescentOptimizer(lr), feed_lr=0.25)
    assert (kind, s["learning_rate"]) == ("sgd", 0.25)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_keras_sgd_with_momentum(nesterov):
    kind, s = tf1_settings(lambda _: tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=nesterov))
    k_kind, k = keras_optimizer(keras.optimizers.SGD(0.1, momentum=0.9, nesterov=nesterov))
    rows = optimizer_rows(kind, s, k_kind, k, ("MomentumOptimizer", "SGD"), "")
    assert all(r.ok for r in rows), rows
    assert {r.item for r in rows} >= {"optimizer.learning_rate", "optimizer.momentum",
                                      "optimizer.nesterov"}


def test_rmsprop_defaults_differ_in_epsilon_and_the_start_is_the_hint():
    # TF1 RMSPropOptimizer: decay 0.9, epsilon 1e-10; Keras RMSprop: rho 0.9, epsilon 1e-7.
    kind, s = tf1_settings(lambda _: tf1.train.RMSPropOptimizer(0.01))
    keras_rmsprop = keras.optimizers.RMSprop(0.01)
    k_kind, k = keras_optimizer(keras_rmsprop)
    rows = optimizer_rows(kind, s, k_kind, k, ("RMSPropOptimizer", "RMSprop"), "")
    bad = [r for r in rows if not r.ok]
    assert [r.item for r in bad] == ["optimizer.epsilon"]
    assert "1e-10" in bad[0].note and "1e-07" in bad[0].note
    # Not built yet: its velocities will start at 0, TF1's mean square at 1.
    assert drift_hint(kind, keras_rmsprop) == RMSPROP_START
    weights = [tf.Variable(tf.zeros([3, 2])), tf.Variable(tf.zeros([2]))]
    keras_rmsprop.build(weights)
    assert drift_hint(kind, keras_rmsprop) == RMSPROP_START  # built: zeros
    for v in keras_rmsprop.variables:
        if "velocity" in v.name:
            v.assign(tf.ones_like(v))
    assert drift_hint(kind, keras_rmsprop) == ""
    assert drift_hint("adam", keras.optimizers.Adam(0.01)) == ""


def test_tf_keras_legacy_rmsprop_without_momentum_is_told_where_epsilon_goes():
    # tf_keras.optimizers.legacy.RMSprop, momentum 0: var -= lr g / (sqrt(ms) + epsilon);
    # TF1 and the other Keras RMSprops: lr g / sqrt(ms + epsilon).
    import tf_keras
    legacy = tf_keras.optimizers.legacy.RMSprop(0.01, epsilon=1e-10)
    assert drift_hint("rmsprop", legacy) == f"{RMSPROP_START}; {RMSPROP_LEGACY_EPSILON}"
    assert drift_hint("rmsprop", tf_keras.optimizers.legacy.RMSprop(0.01, momentum=0.5)) == \
        RMSPROP_START
    assert drift_hint("rmsprop", tf_keras.optimizers.RMSprop(0.01)) == RMSPROP_START


def test_the_float32_rounding_hint_names_a_rounded_setting_of_this_optimizer():
    # float32(0.01) != 0.01: a float64 graph still runs TF1's RMSProp at float32 settings.
    kind, s = tf1_settings(lambda _: tf1.train.RMSPropOptimizer(0.01))
    k_kind, k = keras_optimizer(keras.optimizers.RMSprop(0.01, epsilon=1e-10))
    assert rounded_to_float32(s, k)
    note = float32_rounding(kind, s, k)
    assert "= float32(" in note and "beta_2" not in note and "KerasMatchedAdam" not in note
    kind, s = tf1_settings(lambda _: tf1.train.AdamOptimizer(0.01))
    k_kind, k = keras_optimizer(keras.optimizers.Adam(0.01, epsilon=1e-8))
    assert "KerasMatchedAdam" in float32_rounding(kind, s, k)


def test_keras_adamw_is_not_tf1_adam():
    kind, s = tf1_settings(lambda _: tf1.train.AdamOptimizer(0.01))
    k_kind, k = keras_optimizer(keras.optimizers.AdamW(0.01, epsilon=1e-8))
    [row] = optimizer_rows(kind, s, k_kind, k, ("AdamOptimizer", "AdamW"), "")
    assert not row.ok and "no weight decay" in row.note


def test_tf_keras_optimizers_are_read_through_get_config():
    import tf_keras
    for opt, kind in ((tf_keras.optimizers.Adam(0.01, epsilon=1e-8), "adam"),
                      (tf_keras.optimizers.legacy.Adam(0.01, epsilon=1e-8), "adam"),
                      (tf_keras.optimizers.SGD(0.01, momentum=0.5), "sgd"),
                      (tf_keras.optimizers.RMSprop(0.01), "rmsprop")):
        got_kind, s = keras_optimizer(opt)
        assert got_kind == kind and s["learning_rate"] == pytest.approx(0.01)


def test_keras_clipping_where_tf1_runs_no_clip_op_warns_and_of_tf1s_kind_passes():
    kind, s = tf1_settings(lambda _: tf1.train.AdamOptimizer(0.01))
    k_kind, k = keras_optimizer(keras.optimizers.Adam(0.01, epsilon=1e-8, global_clipnorm=1.0))
    rows = optimizer_rows(kind, s, k_kind, k, ("AdamOptimizer", "Adam"), "")
    clip = next(r for r in rows if r.item == "optimizer.global_clipnorm")
    assert clip.ok and clip.note == ("WARNING Adam global_clipnorm=1, and TF1's train_op runs "
                                     "no tf.clip_by_* op: if TF1 does not clip, leave it out")
    rows = optimizer_rows(kind, s, k_kind, k, ("AdamOptimizer", "Adam"), "",
                          ("by their global norm", "global_clipnorm"))
    clip = next(r for r in rows if r.item == "optimizer.global_clipnorm")
    assert clip.ok and not clip.note.startswith("WARNING")


def test_two_optimizers_on_the_compared_variables_are_mixed():
    graph = tf.Graph()
    with graph.as_default():
        w = tf1.get_variable("w", [3], initializer=tf1.ones_initializer())
        loss = tf.reduce_sum(tf.square(w))
        op = tf.group(tf1.train.AdamOptimizer(0.1).minimize(loss),
                      tf1.train.GradientDescentOptimizer(0.1).minimize(loss))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            kind, _ = tf1_optimizer(op, sess)
    assert kind == "mixed: adam, sgd"


def test_the_clipping_hint_compares_tf1s_graph_with_the_keras_settings():
    from pgtwin.parity.optimizer_config import clipping_hint

    global_norm = ("by their global norm", "global_clipnorm")
    assert clipping_hint(global_norm, {"global_clipnorm": 0.5}) == ""
    assert clipping_hint(None, {}) == ""
    assert "has clipnorm: use global_clipnorm" in clipping_hint(global_norm, {"clipnorm": 0.5})
    assert "does not clip: set global_clipnorm" in clipping_hint(global_norm, {})
    assert clipping_hint(None, {"clipvalue": 1.0}) == \
        "the Keras optimizer clips (clipvalue) and TF1's graph does not"


def test_tf1_clipping_is_read_from_the_train_ops_graph():
    from pgtwin.parity.optimizer_config import tf1_clipping

    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_sum(w ** 2)
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        grads, variables = zip(*opt.compute_gradients(loss))
        plain = opt.apply_gradients(zip(grads, variables))
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        clipping = opt.apply_gradients(zip(clipped, variables))
    assert tf1_clipping(plain) is None
    assert tf1_clipping(clipping) == ("by their global norm", "global_clipnorm")


def test_a_clip_in_the_forward_pass_is_not_a_gradient_clipping():
    # tf.log(tf.clip_by_value(probs, 1e-8, 1)) clips no gradient: it was read as one, and the
    # hint said to set clipvalue, which would add a bug.
    from pgtwin.parity.optimizer_config import tf1_clipping

    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.ones_initializer())
        probs = tf.nn.softmax(w)
        loss = -tf.reduce_sum(tf.math.log(tf.clip_by_value(probs, 1e-8, 1.0)))
        for minimize in (tf.compat.v1.train.AdamOptimizer(0.1).minimize,
                         tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize):
            assert tf1_clipping(minimize(loss), loss) is None
            assert tf1_clipping(minimize(loss)) is None  # the gradient ops stop the walk too
        opt = tf.compat.v1.train.AdamOptimizer(0.1)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped = [tf.clip_by_value(g, -1.0, 1.0) for g in grads]
        train_op = tf.group(opt.apply_gradients(zip(clipped, variables)))  # under a group
        assert tf1_clipping(train_op, loss) == ("by value", "clipvalue")


@pytest.mark.parametrize("ordered", [False, True])
def test_a_train_op_whose_gradient_reads_what_another_step_writes_is_a_race(ordered):
    # DDPG/SAC shape: the actor's loss reads Q(s, pi(s)) through a second call of the
    # critic (its own reads of wq), and the critic's own step writes wq. Grouped bare, TF1
    # may run that read after the write; with the critic's step under
    # control_dependencies([train_pi]) the read comes first.
    from types import SimpleNamespace

    from pgtwin.parity.optimizer_config import tf1_step_races
    from pgtwin.parity.weights_rung import _race_note
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf.ones([4, 3])
        a = tf1.placeholder(tf.float32, [None, 1])
        wa = tf1.get_variable("actor/w", [3, 1])
        wq = tf1.get_variable("critic/w", [4, 1])
        pi = tf.tanh(x @ wa)
        q_pi = tf.concat([x, pi], 1) @ wq
        q_a = tf.concat([x, a], 1) @ wq
        train_pi = tf1.train.AdamOptimizer(0.1).minimize(-tf.reduce_mean(q_pi), var_list=[wa])
        with tf.control_dependencies([train_pi] if ordered else []):
            train_q = tf1.train.AdamOptimizer(0.1).minimize(tf.reduce_mean(q_a ** 2),
                                                            var_list=[wq])
        step = tf.group(train_pi, train_q)
        races = tf1_step_races(step)
        note = _race_note(SimpleNamespace(train_op=step))
    if ordered:
        assert races == [] and note == ""
    else:
        assert races == [("critic/w", "actor/w")]
        assert note.startswith("TF1's train_op writes critic/w while another of its ops (the "
                               "gradient or the update of actor/w) reads it, with no control "
                               "dependency between the two: TF1 runs each read before or "
                               "after the write")


@pytest.mark.parametrize("ordered", [False, True])
def test_an_average_grouped_bare_with_the_step_it_follows_is_a_race(ordered):
    # tf.group(minimize, ema.apply(weights)): the average's update reads w, which the
    # step writes, with no order between them; under control_dependencies([minimize]) it
    # reads the stepped w.
    from pgtwin.parity.optimizer_config import tf1_step_races
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        w = tf1.get_variable("w", [3, 1])
        minimize = tf1.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_sum(tf.ones([2, 3]) @ w))
        ema = tf1.train.ExponentialMovingAverage(0.99)
        if ordered:
            with tf.control_dependencies([minimize]):
                step = ema.apply([w])
        else:
            step = tf.group(minimize, ema.apply([w]))
        races = tf1_step_races(step)
    assert races == ([] if ordered else [("w", "w/ExponentialMovingAverage")])
