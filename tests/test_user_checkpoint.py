"""A TF1 Saver checkpoint converted into the user's own Keras model (pgtwin.migrate.user_checkpoint).

The oracle is always the TF1 side: the TF1 class's own graph and Session (its outputs, its
``train_op`` step) and ``tf.train.load_checkpoint`` of what its ``Saver`` wrote. The
converted checkpoint is read back the way a user would: ``tf.train.Checkpoint(model=...)``
on a freshly built copy of their model, never through the converter.
"""
from __future__ import annotations

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.cli import main
from pgtwin.cli.factories import FactoryError, load_factory
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.migrate.agent_checkpoint import ConversionVerificationError
from pgtwin.migrate.user_checkpoint import UserCheckpointError, convert_user_checkpoint

tf1 = tf.compat.v1
OBS_DIM, HIDDEN, N_ACTIONS = 3, 5, 2


class TF1Policy:
    """Old-style TF1 code: placeholders, ``get_variable`` layers, Adam, a Saver and a Session."""

    def __init__(self, bias=True, lr=0.01, dtype=tf.float32, seed=0, betas=(0.9, 0.999),
                 epsilon=1e-8, optimizer=None):
        tf1.set_random_seed(seed)
        self.obs = tf1.placeholder(dtype, [None, OBS_DIM], name="obs")
        self.act = tf1.placeholder(tf.int32, [None], name="act")
        self.ret = tf1.placeholder(dtype, [None], name="ret")
        with tf1.variable_scope("pi"):
            hidden = tf.tanh(self._dense(self.obs, HIDDEN, "fc1", bias))
            self.logits = self._dense(hidden, N_ACTIONS, "out", bias)
        neg_log_prob = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.act,
                                                                      logits=self.logits)
        self.loss = tf.reduce_mean(neg_log_prob * self.ret)
        self.train_op = (optimizer(lr) if optimizer else tf1.train.AdamOptimizer(
            lr, *betas, epsilon)).minimize(self.loss)
        self.saver = tf1.train.Saver()
        self.sess = tf1.Session()
        self.sess.run(tf1.global_variables_initializer())

    @staticmethod
    def _dense(x, units, name, bias):
        with tf1.variable_scope(name):
            w = tf1.get_variable("weights", [x.shape[1], units], dtype=x.dtype,
                                 initializer=tf1.truncated_normal_initializer(stddev=0.5))
            out = tf.matmul(x, w)
            if bias:
                out += tf1.get_variable("biases", [units], dtype=x.dtype,
                                        initializer=tf1.constant_initializer(0.1))
        return out

    def feed(self, batch):
        return {self.obs: batch["obs"], self.act: batch["act"], self.ret: batch["ret"]}


def keras_policy(bias=True, dtype="float32", named=True):
    """The migration: the same two layers as a Keras 3 Sequential (``named=False``: Keras'
    own names, numbered per process: sequential_3/dense_6)."""
    def name(text):
        return {"name": text} if named else {}
    return keras.Sequential([
        keras.Input((OBS_DIM,), dtype=dtype),
        keras.layers.Dense(HIDDEN, activation="tanh", use_bias=bias, dtype=dtype, **name("fc1")),
        keras.layers.Dense(N_ACTIONS, use_bias=bias, dtype=dtype, **name("out"))], **name("pi"))


class TF2Policy:
    def __init__(self, bias=True, lr=0.01, dtype="float32", betas=(0.9, 0.999), epsilon=1e-8,
                 make_optimizer=None, named=True):
        self.dtype = dtype
        self.model = keras_policy(bias, dtype, named)
        self.optimizer = make_optimizer() if make_optimizer else \
            keras.optimizers.Adam(lr, *betas, epsilon)

    def loss(self, batch):
        logits = self.model(tf.cast(batch["obs"], self.dtype))
        nlp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(batch["act"], tf.int32), logits=logits)
        return {"loss": tf.reduce_mean(nlp * tf.cast(batch["ret"], self.dtype)), "logits": logits}


def make_batch(n=16, seed=1):
    rng = np.random.default_rng(seed)
    return {"obs": rng.standard_normal((n, OBS_DIM)), "act": rng.integers(0, N_ACTIONS, n),
            "ret": rng.standard_normal(n)}


def tf1_program(bias=True, dtype="float32", **kwargs):
    return TF1Program(build=lambda: TF1Policy(bias, dtype=tf.as_dtype(dtype), **kwargs),
                      feeds={"obs": "obs", "act": "act", "ret": "ret"},
                      loss="loss", outputs={"logits": "logits"}, train_op="train_op")


def tf2_program(bias=True, dtype="float32", optimizer="optimizer", **kwargs):
    return TF2Program(build=lambda: TF2Policy(bias, dtype=dtype, **kwargs),
                      loss=lambda agent, batch: agent.loss(batch), outputs=["logits"],
                      optimizer=optimizer, model="model")


def trained_tf1(tmp_path, batch, bias=True, dtype=tf.float32, steps=2, **kwargs):
    """Train the TF1 class ``steps`` steps and save it; returns (graph, agent, prefix)."""
    graph = tf.Graph()
    with graph.as_default():
        agent = TF1Policy(bias, dtype=dtype, **kwargs)
        for _ in range(steps):
            agent.sess.run(agent.train_op, agent.feed(batch))
        prefix = agent.saver.save(agent.sess, str(tmp_path / "tf1" / "model.ckpt"))
    return graph, agent, prefix


def next_tf1_step(graph, agent, batch):
    """The oracle of a converted optimizer's next step: TF1's own next ``train_op`` step
    after the save, as ``(names, weights after it)``."""
    names = ["pi/fc1/weights", "pi/fc1/biases", "pi/out/weights", "pi/out/biases"]
    with graph.as_default():
        agent.sess.run(agent.train_op, agent.feed(batch))
        by_name = {v.op.name: v for v in tf1.global_variables()}
        return names, agent.sess.run([by_name[n] for n in names])


def resumed_step(user, dst, batch):
    """The user's model and optimizer restored from ``dst`` as convert-checkpoint's printed
    line says (every value consumed), then one train step on ``batch``: the variables."""
    user.model(np.zeros((1, OBS_DIM), user.dtype))
    status = tf.train.Checkpoint(model=user.model, optimizer=user.optimizer).restore(dst)
    user.optimizer.build(user.model.trainable_variables)
    status.assert_consumed()
    with tf.GradientTape() as tape:
        loss = user.loss(batch)["loss"]
    variables = user.model.trainable_variables
    user.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return variables


def fresh_model(bias=True, dtype="float32"):
    model = keras_policy(bias, dtype)
    model(np.zeros((1, OBS_DIM), dtype))
    return model


@pytest.mark.parametrize("bias", [True, False], ids=["with_biases", "kernels_only"])
def test_converted_checkpoint_restores_into_a_fresh_model_with_tf1s_outputs(tmp_path, bias):
    batch = make_batch()
    graph, agent, src = trained_tf1(tmp_path, batch, bias)
    with graph.as_default():
        tf1_logits = agent.sess.run(agent.logits, agent.feed(batch))
    dst = str(tmp_path / "tf2" / "ckpt")

    result = convert_user_checkpoint(src, dst, tf1_program(bias), tf2_program(bias), batch)

    assert result.report.ok and result.optimizer_state == "adam" and result.iterations == 2
    names = ["pi/fc1/weights", "pi/fc1/biases", "pi/out/weights", "pi/out/biases"]
    assert [p.tf1.name for p in result.mapping.pairs] == (names if bias else names[::2])
    model = fresh_model(bias)
    tf.train.Checkpoint(model=model).restore(dst).expect_partial() \
        .assert_existing_objects_matched()
    reader = tf.train.load_checkpoint(src)
    kernels = [v for v in model.trainable_variables]
    for name, v in zip(names if bias else names[::2], kernels):
        np.testing.assert_array_equal(np.asarray(v), reader.get_tensor(name))
    np.testing.assert_allclose(model(batch["obs"].astype("float32")), tf1_logits,
                               rtol=1e-5, atol=1e-6)
    assert not [f for f in os.listdir(tmp_path / "tf2") if f.startswith(".tmp")]


# Even in a float64 graph TF1 rounds Python hyperparameters to float32 and keeps the beta
# powers in float32; Keras 3 computes beta^t from float32-rounded betas in the variables'
# dtype. The two steps agree to the last bit only when lr, epsilon, the betas and their
# first powers are exact in float32: 7^4 and 15^4 need 12 and 16 bits. With 0.9/0.999 they
# part by ~7e-6 of a step (docs/migration.md, "Checkpoints into your own model").
EXACT = dict(lr=2.0 ** -7, betas=(0.875, 0.9375), epsilon=2.0 ** -27)


def test_adam_state_converts_and_the_next_step_is_tf1s_own_train_op_step(tmp_path):
    batch = make_batch()
    graph, agent, src = trained_tf1(tmp_path, batch, dtype=tf.float64, steps=3, **EXACT)
    names, expected = next_tf1_step(graph, agent, batch)
    dst = str(tmp_path / "tf2" / "ckpt")

    result = convert_user_checkpoint(src, dst, tf1_program(dtype="float64", **EXACT),
                                     tf2_program(dtype="float64", **EXACT), batch)
    assert (result.optimizer_state, result.iterations) == ("adam", 3)

    user = TF2Policy(dtype="float64", **EXACT)
    user.model(np.zeros((1, OBS_DIM)))
    tf.train.Checkpoint(model=user.model, optimizer=user.optimizer).restore(dst) \
        .assert_existing_objects_matched()
    with tf.GradientTape() as tape:
        loss = user.loss(batch)["loss"]
    variables = user.model.trainable_variables
    user.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    assert int(user.optimizer.iterations.numpy()) == 4
    for name, want, got in zip(names, expected, variables):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12, err_msg=name)


def test_regression_the_checkpoint_restores_into_a_plain_keras_model(tmp_path):
    """Was: "Found 4 Python objects that were not bound"; weights under optimizer/_trainable_variables/N."""
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    dst = str(tmp_path / "tf2" / "ckpt")
    plain = TF2Program(build=keras_policy, loss=lambda model, b: tf.reduce_sum(
        model(tf.cast(b["obs"], "float32"))))
    result = convert_user_checkpoint(src, dst, None, plain, batch)
    assert result.optimizer_state == "none"
    assert sorted(result.not_converted) == sorted(
        n for n, _ in tf.train.list_variables(src) if "Adam" in n or "power" in n)

    keys = [n for n, _ in tf.train.list_variables(dst)]
    assert not [k for k in keys if k.startswith("optimizer/")]
    model = fresh_model()
    status = tf.train.Checkpoint(model=model).restore(dst)
    status.assert_consumed()  # every value in it went into the plain model, and vice versa
    reader = tf.train.load_checkpoint(src)
    for name, v in zip(["pi/fc1/weights", "pi/fc1/biases", "pi/out/weights", "pi/out/biases"],
                       model.trainable_variables):
        np.testing.assert_array_equal(np.asarray(v), reader.get_tensor(name))


@pytest.mark.parametrize("tf1_bias, tf2_bias, listed", [
    (False, True, ["TF2 pi/fc1/bias (5,)", "TF2 pi/out/bias (2,)", "use_bias=False"]),
    (True, False, ["TF1 pi/fc1/biases (5,)", "TF1 pi/out/biases (2,)"]),
], ids=["tf2_gained_biases", "tf2_lost_biases"])
def test_unpaired_variables_are_listed_with_shapes_and_nothing_is_written(
        tmp_path, tf1_bias, tf2_bias, listed):
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch, tf1_bias)
    out = tmp_path / "tf2"
    for tf1_side in (tf1_program(tf1_bias), None):
        with pytest.raises(UserCheckpointError) as err:
            convert_user_checkpoint(src, str(out / "ckpt"), tf1_side, tf2_program(tf2_bias), batch)
        for text in listed + [src, "Nothing was written"]:
            assert text in str(err.value)
        # each problem once: in the list, not again under the table of the pairs found
        assert str(err.value).count(listed[0]) == 1, str(err.value)
        assert "UNPAIRED" not in str(err.value) and "The pairs found:" in str(err.value)
        assert not out.exists() or os.listdir(out) == []


def test_optimizer_state_reset_and_a_refused_convert(tmp_path):
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    result = convert_user_checkpoint(src, str(tmp_path / "a" / "ckpt"), tf1_program(),
                                     tf2_program(), batch, optimizer_state="reset")
    assert (result.optimizer_state, result.iterations) == ("fresh", 0)
    sgd = dict(make_optimizer=lambda: keras.optimizers.SGD(0.01))
    with pytest.raises(UserCheckpointError, match="only TF1 Adam's state converts.*reset"):
        convert_user_checkpoint(src, str(tmp_path / "b" / "ckpt"), tf1_program(),
                                tf2_program(**sgd), batch, optimizer_state="convert")
    assert not (tmp_path / "b").exists() or os.listdir(tmp_path / "b") == []
    auto = convert_user_checkpoint(src, str(tmp_path / "c" / "ckpt"), tf1_program(),
                                   tf2_program(**sgd), batch)
    assert auto.optimizer_state == "fresh" and "SGD" in auto.notes[0]
    # the checkpoint's Adam state is left behind: a resumed run's next step is not TF1's
    [warned] = [w for w in auto.report.warnings if w.item == "optimizer state"]
    assert (warned.item, warned.note) == (
        "optimizer state", f"WARNING {auto.notes[0].split('started fresh: ')[1]}: the "
        "optimizer starts fresh, so a resumed run's next step is not TF1's next step (its "
        "moments start again)")
    assert not [w for w in result.report.warnings if w.item == "optimizer state"]  # asked for


def tf1_factory(dtype="float32"):
    return tf1_program(dtype=dtype)


def tf2_factory(dtype="float32"):
    return tf2_program(dtype=dtype)


def test_the_cli_writes_into_the_users_model(tmp_path, capsys):
    batch = make_batch()
    graph, agent, src = trained_tf1(tmp_path, batch)
    with graph.as_default():
        tf1_logits = agent.sess.run(agent.logits, agent.feed(batch))
    np.savez(tmp_path / "batch.npz", **batch)
    dst = str(tmp_path / "tf2" / "ckpt")
    argv = ["convert-checkpoint", src, dst, "--tf1", "tests.test_user_checkpoint:tf1_factory",
            "--tf2", "tests.test_user_checkpoint:tf2_factory", "--inputs",
            str(tmp_path / "batch.npz")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "pi/fc1/weights" in out and "parity OK" in out and "iterations 2" in out
    assert "note: without --tf1" not in out  # with it, the forward pass was compared
    # the printed way to restore it, done as it says: every value restored (assert_consumed)
    assert (f"restore it with status = tf.train.Checkpoint(model=model, optimizer=optimizer)"
            f".restore({dst!r}), then optimizer.build(model.trainable_variables) before "
            "status.assert_consumed()") in out
    user = TF2Policy()
    user.model(np.zeros((1, OBS_DIM), "float32"))
    status = tf.train.Checkpoint(model=user.model, optimizer=user.optimizer).restore(dst)
    user.optimizer.build(user.model.trainable_variables)
    status.assert_consumed()
    assert int(user.optimizer.iterations.numpy()) == 2
    np.testing.assert_allclose(user.model(batch["obs"].astype("float32")), tf1_logits,
                               rtol=1e-5, atol=1e-6)
    assert main(argv) == 1 and "exists" in capsys.readouterr().err
    bad = list(argv)
    bad[2], bad[6] = dst + "2", "tests.test_user_checkpoint:no_such_factory"
    assert main(bad) == 1
    assert "no attribute 'no_such_factory'" in capsys.readouterr().err


def not_a_program(dtype="float32"):
    return {"dtype": dtype}


def raising_factory(dtype="float32"):
    raise RuntimeError(f"no {dtype} model here")


def test_load_factory_errors_name_the_part_and_dtype_is_passed():
    assert load_factory("tests.test_user_checkpoint:not_a_program", dict, "float64") == {
        "dtype": "float64"}
    assert load_factory("tests.test_user_checkpoint:keras_policy", keras.Model).name == "pi"
    for spec, message in [("no_colon", "is not MODULE:FACTORY"),
                          ("no_such_module_xyz:f", "no module named 'no_such_module_xyz'"),
                          ("tests.test_user_checkpoint:nope", "has no attribute 'nope'"),
                          ("tests.test_user_checkpoint:OBS_DIM", "is a int, not a factory"),
                          ("tests.test_user_checkpoint:not_a_program", "returned a dict"),
                          ("tests.test_user_checkpoint:raising_factory",
                           r"calling raising_factory\(dtype='float32'\) raised RuntimeError: "
                           "no float32 model here")]:
        with pytest.raises(FactoryError, match=message):
            load_factory(spec, TF2Program, "float32", what="--tf2")


class TFKerasPolicy:
    """The same migration in ``tf_keras`` (legacy Keras), with its Adam."""

    dtype = "float32"

    def __init__(self):
        import tf_keras

        self.model = tf_keras.Sequential([
            tf_keras.layers.Dense(HIDDEN, activation="tanh", name="fc1", input_shape=(OBS_DIM,)),
            tf_keras.layers.Dense(N_ACTIONS, name="out")], name="pi")
        self.optimizer = tf_keras.optimizers.Adam(0.01, epsilon=1e-8)


def test_a_tf_keras_model_and_adam_take_the_checkpoint(tmp_path):
    batch = make_batch()
    graph, agent, src = trained_tf1(tmp_path, batch)
    with graph.as_default():
        tf1_logits = agent.sess.run(agent.logits, agent.feed(batch))
    program = TF2Program(build=TFKerasPolicy, loss=lambda a, b: TF2Policy.loss(a, b),
                         outputs=["logits"], optimizer="optimizer", model="model")
    dst = str(tmp_path / "tf2" / "ckpt")
    result = convert_user_checkpoint(src, dst, tf1_program(), program, batch)
    assert (result.optimizer_state, result.iterations) == ("adam", 2)
    user = TFKerasPolicy()
    tf.train.Checkpoint(model=user.model).restore(dst).expect_partial()
    np.testing.assert_allclose(user.model(batch["obs"].astype("float32")), tf1_logits,
                               rtol=1e-5, atol=1e-6)


def test_two_slots_of_another_optimizer_are_not_taken_for_adams_m_and_v():
    # Adadelta names its accumulators W/Adadelta and W/Adadelta_1, RMSProp W/RMSProp(_1):
    # any S, S_1 used to pass as Adam's m and v (an Adadelta actor beside an Adam critic
    # converted with the critic's step count and no word).
    from pgtwin.migrate.tf1_checkpoint import adam_pair

    m, v = np.array([0.5, -0.25]), np.array([0.01, 0.04])
    assert adam_pair({"Adadelta": v, "Adadelta_1": v}) is None
    assert adam_pair({"RMSProp": v, "RMSProp_1": m}) is None
    assert adam_pair({"critic_rms": v, "critic_rms_1": m}) is None  # a negative "v"
    got = adam_pair({"my_adam": m, "my_adam_1": v})  # Adam under a name of its own
    assert got is not None and got[0] is m and got[1] is v


def test_a_float64_adam_checkpoint_is_read_as_float64_though_its_beta_powers_are_float32():
    from pgtwin.cli.commands.convert_checkpoint import _checkpoint_dtype

    values = {"policy/w": np.zeros((2, 2)), "policy/w/Adam": np.zeros((2, 2)),
              "beta1_power": np.float32(0.9), "beta2_power": np.float32(0.999)}
    assert _checkpoint_dtype(values) == "float64"
    assert _checkpoint_dtype({**values, "policy/b": np.zeros(2, np.float32)}) == "float32"


def test_a_model_with_keras_own_layer_names_converts_and_verifies(tmp_path):
    # The check restores into a second build of the program, whose unnamed layers Keras
    # numbers afresh (sequential_1/dense_2 where the first was sequential/dense): it looked
    # the first build's names up in the second and raised KeyError.
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    result = convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), tf1_program(),
                                     tf2_program(named=False), batch)
    assert result.report.ok, result.report.to_table()
    assert result.optimizer_state == "adam" and result.iterations == 2


def test_a_destination_that_cannot_be_written_is_named_and_nothing_is_left(tmp_path):
    # /proc refuses new directories (as a read-only mount does): it was tempfile's traceback.
    from pgtwin.migrate.checkpoint_prefix import staged_prefix

    with pytest.raises(ValueError, match=r"cannot write the checkpoint /proc/x/ckpt: .*; choose "
                                         r"a directory you can write in. Nothing was written."):
        with staged_prefix("/proc/x/ckpt"):
            pass
    # a failure inside: the directories made for the prefix go too
    with pytest.raises(RuntimeError):
        with staged_prefix(str(tmp_path / "a" / "b" / "ckpt")):
            raise RuntimeError("the conversion failed")
    assert os.listdir(tmp_path) == []


def test_with_the_tf1_program_its_optimizer_settings_are_held_to_the_keras_ones(tmp_path):
    # The one-step check steps both sides with the Keras settings (only the state is under
    # test there): a Keras Adam at lr 1e-3 against TF1's 1e-2 was written, "parity OK", and
    # nothing said so. Going on at another rate may be the point: a warning.
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    result = convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), tf1_program(),
                                     tf2_program(lr=1e-3), batch)
    [warned] = result.report.warnings
    assert (warned.item, warned.note) == (
        "optimizer.learning_rate", "WARNING TF1 learning_rate=0.01, Adam learning_rate=0.001: "
                                   "write learning_rate=0.01: the next step is not TF1's")
    assert "1 with a warning" in result.report.summary()


def test_a_meta_file_or_a_moved_directory_is_read_or_named(tmp_path):
    # The .meta file is the one users pick; a directory copied from elsewhere keeps a
    # 'checkpoint' file whose absolute paths name nothing here.
    import shutil

    from pgtwin.migrate.tf1_checkpoint import checkpoint_prefix

    _, _, src = trained_tf1(tmp_path, make_batch())
    assert checkpoint_prefix(src + ".meta") == src
    moved = tmp_path / "moved"
    shutil.copytree(os.path.dirname(src), moved)
    shutil.rmtree(os.path.dirname(src))
    with pytest.raises(ValueError, match=r"'checkpoint' file names no checkpoint that exists "
                                         r"\(its paths are stale"):
        checkpoint_prefix(str(moved))


def test_without_the_tf1_program_float_inputs_take_the_checkpoints_dtype(tmp_path):
    # With --tf1 the feeds are cast to the placeholders' dtypes; without, a float64 batch met
    # a float32 model ("cannot compute Mul ... double tensor").
    def uncast_loss(agent, b):  # as user code feeds a float32 model: no casts of its own
        logits = agent.model(b["obs"])
        nlp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["act"], tf.int32), logits=logits)
        return {"loss": tf.reduce_mean(nlp * b["ret"])}

    batch = make_batch()  # float64 obs and returns
    _, _, src = trained_tf1(tmp_path, batch)
    program = TF2Program(build=TF2Policy, loss=uncast_loss, optimizer="optimizer", model="model")
    result = convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), None, program, batch)
    assert result.report.ok, result.report.to_table()


class _RecurrentPolicy(keras.Model):
    """An LSTM torso and a head: Keras 3's LSTM holds a SeedGenerator (for its dropout),
    whose state tf.train.Checkpoint does not save."""

    def __init__(self):
        super().__init__()
        self.rnn = keras.layers.LSTM(4, name="lstm")
        self.head = keras.layers.Dense(2, name="head")

    def call(self, obs):
        return self.head(self.rnn(obs))


def test_a_keras_lstm_model_converts_though_its_seed_state_is_never_saved(tmp_path):
    # The seed generator's state, drawn afresh per build, failed the exact comparison of
    # the model's other variables: every conversion into a model with an LSTM was refused.
    rng = np.random.default_rng(0)
    values = {"lstm/lstm_cell/kernel": rng.normal(size=(3, 16)),
              "lstm/lstm_cell/recurrent_kernel": rng.normal(size=(4, 16)),
              "lstm/lstm_cell/bias": rng.normal(size=(16,)),
              "head/kernel": rng.normal(size=(4, 2)), "head/bias": rng.normal(size=(2,))}
    graph = tf.Graph()
    with graph.as_default():
        saved = [tf1.get_variable(n, initializer=v.astype("float32")) for n, v in values.items()]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            src = tf1.train.Saver(saved).save(session, str(tmp_path / "tf1" / "model.ckpt"))
    batch = {"obs": rng.normal(size=(5, 6, 3)), "actions": rng.integers(0, 2, 5)}
    program = TF2Program(build=_RecurrentPolicy, loss=lambda m, b: tf.reduce_sum(
        m(tf.cast(b["obs"], "float32"))))
    result = convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), None, program, batch)
    seed = [r for r in result.report.rows if r.item.endswith("seed_generator_state")]
    assert seed and all(r.ok and "does not save it" in r.note for r in seed)
    model = _RecurrentPolicy()
    model(tf.zeros((1, 6, 3)))
    tf.train.Checkpoint(model=model).restore(str(tmp_path / "tf2" / "ckpt"))
    for name, v in zip(values, model.trainable_variables):  # the LSTM's, then the head's
        np.testing.assert_array_equal(np.asarray(v), values[name].astype("float32"))


def test_an_agent_with_two_keras_optimizers_writes_none_and_says_why(tmp_path):
    # Which variables each of an actor-critic's Keras optimizers steps is known only once
    # its train step has built them: writing the first over every variable would restore
    # into neither. The weights still convert and verify.
    from tests import actor_critic_programs as ac

    class Agent(ac.KerasActorCritic, tf.Module):
        def __init__(self):
            tf.Module.__init__(self)
            ac.KerasActorCritic.__init__(self)

    graph, batch = tf.Graph(), ac.make_batch()
    with graph.as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        old = ac.TF1ActorCritic()
        old.sess.run(old.train_op, {old.obs_ph: batch["obs"], old.act_ph: batch["actions"],
                                    old.ret_ph: batch["returns"]})
        prefix = tf.compat.v1.train.Saver().save(old.sess, str(tmp_path / "ac"))
        old.sess.close()
    program = dataclasses.replace(ac.tf2_program(), build=Agent)
    done = convert_user_checkpoint(prefix, str(tmp_path / "out"), ac.tf1_program(), program,
                                   batch)
    assert done.optimizer_state == "none" and done.report.ok
    assert done.notes == ["optimizer state not converted, started fresh: the TF2 object holds "
                          "2 Keras optimizers (Adam, Adam), and which variables each steps is "
                          "known only once your train step has built them: none is written, "
                          "each starts fresh (TF2Program.optimizer names one to write with "
                          "the state of every converted variable)"]
    with pytest.raises(UserCheckpointError, match="holds 2 Keras optimizers"):
        convert_user_checkpoint(prefix, str(tmp_path / "out2"), ac.tf1_program(), program,
                                batch, optimizer_state="convert")


class TF1EnvStepSchedule(TF1Policy):
    """SGD on exponential_decay(0.1, global_step, 96, 0.5), global_step counting env steps:
    32 a train step (RL code that decays by experience collected)."""

    def __init__(self, dtype=tf.float32):
        super().__init__(dtype=dtype)
        step = tf1.train.get_or_create_global_step()
        rate = tf1.train.exponential_decay(0.1, step, 96, 0.5)
        with tf.control_dependencies([tf1.train.GradientDescentOptimizer(rate).minimize(
                self.loss)]):
            self.train_op = tf1.assign_add(step, 32)
        self.saver = tf1.train.Saver()
        self.sess.run(tf1.global_variables_initializer())


def test_a_tf1_schedule_on_env_steps_sets_the_iterations_whose_rate_is_tf1s(tmp_path):
    # After 5 train steps TF1's global_step is 160 and its rate 0.1 * 0.5 ** (160 / 96). The
    # port decays per update, ExponentialDecay(0.1, 3, 0.5): its rate equals TF1's at
    # iterations 5 (0.1 * 0.5 ** (5 / 3), the same number), and at 160 it would be 1e-17.
    batch = make_batch()
    graph = tf.Graph()
    with graph.as_default():
        agent = TF1EnvStepSchedule()
        for _ in range(5):
            agent.sess.run(agent.train_op, agent.feed(batch))
        prefix = agent.saver.save(agent.sess, str(tmp_path / "tf1" / "model.ckpt"))

    def sgd():
        return keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(0.1, 3, 0.5))

    program = dataclasses.replace(tf1_program(), build=TF1EnvStepSchedule)
    done = convert_user_checkpoint(prefix, str(tmp_path / "out"), program,
                                   tf2_program(make_optimizer=sgd), batch)
    assert done.iterations == 5, done.notes
    assert done.notes[-1].startswith("optimizer.iterations set to 5, the first step at which "
                                     "the Keras schedule's rate equals TF1's at its "
                                     "global_step 160")
    guessed = convert_user_checkpoint(prefix, str(tmp_path / "out2"), None,
                                      tf2_program(make_optimizer=sgd), batch)
    assert guessed.iterations == 160 and "give --tf1" in guessed.notes[-1]


def test_a_program_built_in_another_dtype_than_the_checkpoint_is_refused_by_name(tmp_path):
    batch = make_batch()
    _, _, prefix = trained_tf1(tmp_path, batch)  # float32
    with pytest.raises(UserCheckpointError, match=r"pi/fc1/weights: the program makes it "
                                                  r"float64, the checkpoint holds float32 "
                                                  r"\(build the program in the checkpoint's "
                                                  r"dtype"):
        convert_user_checkpoint(prefix, str(tmp_path / "out"), tf1_program(dtype="float64"),
                                tf2_program(dtype="float64"), batch)
    assert not os.path.exists(tmp_path / "out.index")


def test_a_drop_that_matches_nothing_and_a_directory_destination_are_refused(tmp_path):
    batch = make_batch()
    _, _, prefix = trained_tf1(tmp_path, batch)
    with pytest.raises(UserCheckpointError, match=r"drop \['crtic/'\] matches nothing in "
                                                  r"checkpoint .*'pi/'"):
        convert_user_checkpoint(prefix, str(tmp_path / "out"), None, tf2_program(), batch,
                                drop=["crtic/"])
    with pytest.raises(UserCheckpointError, match=r"ends in '/': it is a prefix"):
        convert_user_checkpoint(prefix, str(tmp_path / "dir") + "/", None, tf2_program(), batch)
    assert not any(p.name.startswith(("out", "dir")) for p in tmp_path.iterdir())


def test_outputs_that_part_in_the_verification_are_told_why_as_compare_tells_it(tmp_path):
    # The port left out the hidden layer's tanh: every value restores exactly, and the
    # restored model still computes other logits. The verification's forward pass is
    # compare's (pgtwin.parity.forward_rows): its outputs rows say why, where they used to
    # give the numbers alone. By hand: TF1's loss goes through one tanh (fc1), the Keras
    # layers apply none, so the note counts "tanh x1" against "none".
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)

    class WithoutTanh(TF2Policy):
        def __init__(self):
            super().__init__()
            self.model = keras.Sequential([
                keras.Input((OBS_DIM,)), keras.layers.Dense(HIDDEN, name="fc1"),
                keras.layers.Dense(N_ACTIONS, name="out")], name="pi")

    program = TF2Program(build=WithoutTanh, loss=lambda agent, b: agent.loss(b),
                         outputs=["logits"], optimizer="optimizer", model="model")
    with pytest.raises(ConversionVerificationError) as err:
        convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), tf1_program(), program,
                                batch)
    parted = [r for r in err.value.report.rows if not r.ok]
    assert {r.rung for r in parted} >= {"outputs"}
    (logits,) = [r for r in parted if r.rung == "outputs"]
    assert "the activations differ" in logits.note and "tanh x1" in logits.note, logits.note
    assert "the Keras layers apply none" in logits.note
    assert not (tmp_path / "tf2").exists() or not os.listdir(tmp_path / "tf2")


class ListHeldHead(keras.Model):
    """A port whose output layer's weights are Keras 3 weights kept in a list attribute,
    which tf.train.Checkpoint(model=...) does not save."""

    def __init__(self):
        super().__init__()
        self.fc1 = keras.layers.Dense(HIDDEN, activation="tanh", name="fc1")
        self.head = []
        self.build((None, OBS_DIM))

    def build(self, input_shape):
        self.fc1.build(input_shape)
        self.head.append(self.add_weight(shape=(HIDDEN, N_ACTIONS), name="out_kernel"))
        self.head.append(self.add_weight(shape=(N_ACTIONS,), name="out_bias"))
        self.built = True

    def call(self, x):
        return self.fc1(x) @ self.head[0] + self.head[1]


def test_a_variable_the_written_checkpoint_does_not_hold_is_named_as_such(tmp_path):
    """Its restore leaves the fresh model's own value: the verification row says that the
    checkpoint does not track it, not only that the values differ."""
    from pgtwin.migrate.user_checkpoint import UNTRACKED

    class Agent(TF2Policy):
        def __init__(self):
            super().__init__()
            self.model = ListHeldHead()

    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    program = dataclasses.replace(tf2_program(), build=Agent)
    with pytest.raises(ConversionVerificationError) as err:
        convert_user_checkpoint(src, str(tmp_path / "out" / "ckpt"), tf1_program(), program,
                                batch)
    rows = {r.item: r for r in err.value.report.rows if r.rung == "variables"}
    untracked = [r for r in rows.values() if r.note == UNTRACKED]
    assert sorted(r.item.split(" -> ")[0] for r in untracked) == [
        "pi/out/biases", "pi/out/weights"], err.value.report.to_table()
    assert rows[next(i for i in rows if i.startswith("pi/fc1/weights"))].ok


@pytest.mark.parametrize("nesterov,dtype", [(False, "float64"), (True, "float64"),
                                           (True, "float32")])
def test_momentum_state_converts_and_the_next_step_is_tf1s_own_train_op_step(tmp_path,
                                                                             nesterov, dtype):
    # TF1 keeps a <- 0.9 a + g (w <- w - lr a), Keras' SGD m <- 0.9 m - lr g (w <- w + m):
    # written as m = -lr a, the converted SGD's next step is TF1's 4th (float64: 1e-10).
    # Before, the state started fresh and the resumed step parted (13% in a helper's A2C).
    batch = make_batch()

    def tf1_momentum(lr):
        return tf1.train.MomentumOptimizer(lr, 0.9, use_nesterov=nesterov)

    def keras_momentum():
        return keras.optimizers.SGD(0.01, momentum=0.9, nesterov=nesterov)

    graph, agent, src = trained_tf1(tmp_path, batch, dtype=tf.as_dtype(dtype), steps=3,
                                    optimizer=tf1_momentum)
    names, expected = next_tf1_step(graph, agent, batch)
    dst = str(tmp_path / "tf2" / "ckpt")
    result = convert_user_checkpoint(
        src, dst, tf1_program(dtype=dtype, optimizer=tf1_momentum),
        tf2_program(dtype=dtype, make_optimizer=keras_momentum), batch)
    assert result.optimizer_state == "momentum", result.notes
    assert not any(r.note.startswith("WARNING") for r in result.report.rows)
    assert not any(n.endswith("/Momentum") for n in result.not_converted)

    variables = resumed_step(TF2Policy(dtype=dtype, make_optimizer=keras_momentum), dst, batch)
    rtol, atol = (1e-10, 1e-12) if dtype == "float64" else (1e-5, 1e-6)
    for name, want, got in zip(names, expected, variables):
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.5, True)])
def test_rmsprop_state_converts_and_the_next_step_is_tf1s_own_train_op_step(tmp_path,
                                                                            momentum, centered):
    # One rule on both sides (ms <- 0.9 ms + 0.1 g^2, centered mg too; mom <- mu mom +
    # lr g / sqrt(ms (- mg^2) + eps)): the slots copied, the converted RMSprop's next step
    # is TF1's 4th. Before, the state started fresh: TF1's mean square starts at 1 and
    # Keras' at 0, and a resumed step parted by a quarter of itself (A2C).
    batch = make_batch()

    def tf1_rmsprop(lr):
        return tf1.train.RMSPropOptimizer(lr, 0.9, momentum, 1e-6, centered=centered)

    def keras_rmsprop():
        return keras.optimizers.RMSprop(0.01, 0.9, momentum, 1e-6, centered=centered)

    graph, agent, src = trained_tf1(tmp_path, batch, dtype=tf.float64, steps=3,
                                    optimizer=tf1_rmsprop)
    names, expected = next_tf1_step(graph, agent, batch)
    dst = str(tmp_path / "tf2" / "ckpt")
    result = convert_user_checkpoint(
        src, dst, tf1_program(dtype="float64", optimizer=tf1_rmsprop),
        tf2_program(dtype="float64", make_optimizer=keras_rmsprop), batch)
    assert result.optimizer_state == "rmsprop", result.notes
    assert not any(r.note.startswith("WARNING") for r in result.report.rows)
    assert not any("/RMSProp" in n for n in result.not_converted), result.not_converted

    variables = resumed_step(TF2Policy(dtype="float64", make_optimizer=keras_rmsprop), dst,
                             batch)
    # atol 1e-10: TF1's fused kernel takes lr * g * rsqrt(ms + eps), Keras lr * g / sqrt(...);
    # their last bits differ by 4.5e-12 where a step is about 1e-2 (1e-9 of it), against
    # the quarter of a step the fresh state parted by
    for name, want, got in zip(names, expected, variables):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("kind,clip", [
    ("rmsprop", {"global_clipnorm": 0.05}),
    ("adam", {"clipvalue": 0.01}),
    ("momentum", {"clipnorm": 0.02}),
])
def test_the_state_check_steps_both_rules_on_gradients_no_clipping_changes(tmp_path, kind, clip):
    # The check steps the restored Keras optimizer and TF1's rule (without TF1's graph, so
    # without its clipping ops) on the same random gradients, 0.1 N(0, 1) over 32 weights
    # (global norm about 0.57, largest entry about 0.25). A Keras optimizer that clips below
    # that clipped the check's gradients and not the oracle's, and a port that clips as TF1
    # does was refused (a helper's A2C: RMSprop with global_clipnorm=0.5). The gradients are
    # now scaled under every threshold, and the conversion is checked and written.
    batch = make_batch()
    tf1_rules = {"rmsprop": lambda lr: tf1.train.RMSPropOptimizer(lr, 0.9, 0.0, 1e-6),
                 "adam": tf1.train.AdamOptimizer,
                 "momentum": lambda lr: tf1.train.MomentumOptimizer(lr, 0.9)}
    keras_rules = {"rmsprop": lambda: keras.optimizers.RMSprop(0.01, 0.9, 0.0, 1e-6, **clip),
                   "adam": lambda: keras.optimizers.Adam(0.01, epsilon=1e-8, **clip),
                   "momentum": lambda: keras.optimizers.SGD(0.01, momentum=0.9, **clip)}
    _, _, src = trained_tf1(tmp_path, batch, dtype=tf.float64, steps=3,
                            optimizer=tf1_rules[kind])
    result = convert_user_checkpoint(
        src, str(tmp_path / "tf2" / "ckpt"),
        tf1_program(dtype="float64", optimizer=tf1_rules[kind]),
        tf2_program(dtype="float64", make_optimizer=keras_rules[kind]), batch)
    assert result.optimizer_state == kind, result.notes
    steps = [r for r in result.report.rows if r.context.endswith(" step")]
    assert len(steps) == 4 and all(r.ok for r in steps), result.report.to_table()
    # TF1's graph clips nothing: the Keras clipping is told as a warning
    [warned] = [r for r in result.report.rows if r.item == f"optimizer.{next(iter(clip))}"]
    assert warned.note.startswith("WARNING"), warned.note


def test_a_checkpoint_a_renaming_saver_wrote_is_told_so_with_tf1(tmp_path):
    # Saver({'policy/fc/w': w, ...}) writes its own keys: the program's names are missing,
    # variables of their shapes are there. The message said to rebuild with other layer
    # sizes or scopes, which cannot help.
    batch = make_batch()
    graph = tf.Graph()
    with graph.as_default():
        agent = TF1Policy()
        renamed = {f"old/{v.op.name.replace('/', '_')}": v for v in tf1.trainable_variables()}
        src = tf1.train.Saver(renamed).save(agent.sess, str(tmp_path / "renamed" / "ckpt"))
    with pytest.raises(UserCheckpointError) as err:
        convert_user_checkpoint(src, str(tmp_path / "tf2" / "ckpt"), tf1_program(),
                                tf2_program(), batch)
    assert "the checkpoint holds variables of those shapes under other names, as a Saver " \
           "given a var_list dict" in str(err.value), str(err.value)
    assert str(err.value).endswith("Nothing was written.")


def test_a_global_step_no_setting_needs_is_said_where_iterations_stays_0(tmp_path, capsys):
    # RMSProp's rule reads no step count, so iterations stays 0; a loop that counted with
    # TF1's global_step (MonitoredTrainingSession's StopAtStepHook) may read it: the note
    # gives the step. Without --tf1, the output says what went unchecked.
    from pgtwin.migrate.user_checkpoint import _step_left_note
    assert _step_left_note({"global_step": np.asarray(20, np.int64)}) == [
        "optimizer.iterations left at 0, where TF1's global_step was 20: the optimizer's rule "
        "reads no step count, but a loop or schedule of yours may: assign "
        "optimizer.iterations (20) after the restore if it does"]
    assert _step_left_note({"global_step": np.asarray(0, np.int64)}) == []
    assert _step_left_note({"pi/w": np.zeros(2)}) == []
    batch = make_batch()
    _, _, src = trained_tf1(tmp_path, batch)
    np.savez(tmp_path / "batch.npz", **batch)
    argv = ["convert-checkpoint", src, str(tmp_path / "tf2" / "ckpt"), "--tf2",
            "tests.test_user_checkpoint:tf2_factory", "--inputs", str(tmp_path / "batch.npz")]
    assert main(argv) == 0
    assert "note: without --tf1 the outputs, loss and optimizer settings were not compared" \
        in capsys.readouterr().out


class TwoAdams:
    """An actor and a critic, each with its own AdamOptimizer (the critic's beta1 0.8): the
    checkpoint holds beta1_power (the actor's, made first) and beta1_power_1."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.ret = tf1.placeholder(tf.float32, [None], name="ret")
        actor = tf1.get_variable("actor/w", [3, 2])
        critic = tf1.get_variable("critic/w", [3, 1])
        self.actor_loss = tf.reduce_mean(tf.square(self.obs @ actor))
        self.loss = tf.reduce_mean(tf.square(tf.squeeze(self.obs @ critic, 1) - self.ret))
        self.train_op = tf.group(
            tf1.train.AdamOptimizer(1e-2).minimize(self.actor_loss, var_list=[actor]),
            tf1.train.AdamOptimizer(5e-3, beta1=0.8).minimize(self.loss, var_list=[critic]))


def test_the_other_optimizers_powers_dropped_the_critics_adam_state_converts(tmp_path):
    # without --tf1 two pairs of beta powers cannot be told apart; --drop of the actor's
    # was accepted and changed nothing (the powers were read from the whole checkpoint)
    rng = np.random.default_rng(22)
    batch = {"obs": rng.normal(size=(8, 3)), "ret": rng.normal(size=8)}
    with tf.Graph().as_default():
        agent = TwoAdams()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(3):
                sess.run(agent.train_op, {agent.obs: batch["obs"], agent.ret: batch["ret"]})
            src = tf1.train.Saver().save(sess, str(tmp_path / "tf1" / "model"))
    critic = keras.layers.Dense(1, use_bias=False, name="critic")

    class Port(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = keras.Sequential([keras.Input((3,)), critic])
            self.optimizer = keras.optimizers.Adam(5e-3, beta_1=0.8, epsilon=1e-8)

    def loss(agent, b):
        value = tf.squeeze(agent.model(tf.cast(b["obs"], tf.float32)), 1)
        return {"loss": tf.reduce_mean(tf.square(value - tf.cast(b["ret"], tf.float32)))}
    program = TF2Program(build=Port, loss=loss, model="model", optimizer="optimizer")
    fresh = convert_user_checkpoint(src, str(tmp_path / "a"), None, program, batch,
                                    drop=["actor/"])
    assert fresh.optimizer_state == "fresh"
    assert any("several beta powers" in n for n in fresh.notes), fresh.notes
    kept = convert_user_checkpoint(src, str(tmp_path / "b"), None, program, batch,
                                   drop=["actor/", "beta1_power", "beta2_power"])
    assert (kept.optimizer_state, kept.iterations) == ("adam", 3), kept.notes


class ActorReadsCritic:
    """The actor's loss weighted by the critic's value through tf.stop_gradient."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        actor = tf1.get_variable("actor/w", [3, 2])
        critic = tf1.get_variable("critic/w", [3, 1])
        value = tf.stop_gradient(tf.reduce_mean(self.obs @ critic))
        self.loss = tf.reduce_mean(tf.square(self.obs @ actor)) * value
        self.train_op = tf1.train.AdamOptimizer(1e-2).minimize(self.loss, var_list=[actor])


def test_a_variable_the_loss_reads_outside_the_model_is_named_so(tmp_path):
    # converting only the actor: the critic the actor's loss reads is paired, then missing
    # from the checkpoint written from TF2Program.model; the row said it was kept in an
    # untracked list attribute
    from pgtwin.migrate.agent_checkpoint import ConversionVerificationError
    rng = np.random.default_rng(23)
    batch = {"obs": rng.normal(size=(8, 3))}
    with tf.Graph().as_default():
        agent = ActorReadsCritic()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(agent.train_op, {agent.obs: batch["obs"]})
            src = tf1.train.Saver().save(sess, str(tmp_path / "tf1" / "model"))

    class Port(tf.Module):
        def __init__(self):
            super().__init__()
            self.actor = keras.Sequential([keras.Input((3,)), keras.layers.Dense(
                2, use_bias=False, name="actor")])
            self.critic = keras.Sequential([keras.Input((3,)), keras.layers.Dense(
                1, use_bias=False, name="critic")])

    def loss(agent, b):
        obs = tf.cast(b["obs"], tf.float32)
        value = tf.stop_gradient(tf.reduce_mean(agent.critic(obs)))
        return {"loss": tf.reduce_mean(tf.square(agent.actor(obs))) * value}
    with pytest.raises(ConversionVerificationError) as err:
        convert_user_checkpoint(
            src, str(tmp_path / "tf2" / "ckpt"),
            TF1Program(build=ActorReadsCritic, loss="loss", train_op="train_op",
                       feeds={"obs": "obs"}),
            TF2Program(build=Port, loss=loss, model="actor"), batch, optimizer_state="reset")
    assert "the TF2 loss reads this variable and TF2Program.model does not hold it" in \
        str(err.value)
