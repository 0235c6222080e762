"""pgtwin convert-checkpoint: TF1 Saver checkpoints -> the eager twin's TF2 checkpoint.

The converted checkpoint is checked along paths the converter does not take: TF1 values
read back with ``tf.train.load_checkpoint``, the legacy twin restored by its own ``Saver``,
and the eager twin restored by ``ReinforceAgent.restore``; both then take the same Adam
steps, which only agree if m, v and the step count were all converted.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from eager.agent import ReinforceAgent as EagerAgent
from examples import tf1_reinforce
from legacy_graph.agent import ReinforceAgent as LegacyAgent
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.envs import make_vec_env
from pgtwin_core.specs import PolicySpec, spec_for_env
from pgtwin.migrate import agent_checkpoint as checkpoint_migration
from pgtwin.migrate.agent_checkpoint import (
    CheckpointMismatchError, ConversionVerificationError, adam_step_count, convert_checkpoint)
from pgtwin.cli import main

tf1 = tf.compat.v1


def random_grads(agent, rng):
    return {n: 0.1 * rng.standard_normal(w.shape) for n, w in agent.get_weights().items()}


def write_tf1_checkpoint(prefix, values):
    """A TF1 Saver checkpoint holding exactly ``values`` (name -> array)."""
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf1.get_variable(n, initializer=tf.constant(v)) for n, v in values.items()]
        saver = tf1.train.Saver(variables)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            return saver.save(sess, prefix, write_meta_graph=False)


def test_legacy_checkpoint_converts_with_adam_state_and_continues_identically(tmp_path):
    spec = PolicySpec("categorical", (4,), 3, hidden=(8, 5))
    config = ReinforceConfig(dtype="float64")
    rng = np.random.default_rng(0)
    legacy = LegacyAgent(spec, config, seed=3)
    for _ in range(3):
        legacy.apply_gradients(random_grads(legacy, rng))
    src = legacy.save(str(tmp_path / "tf1" / "model"))
    legacy.close()

    result = convert_checkpoint(src, str(tmp_path / "tf2" / "policy"))
    assert result.iterations == 3 and result.optimizer_state == "adam"  # three apply steps
    assert result.spec == spec and result.config.dtype == "float64" and result.report.ok

    reader = tf.train.load_checkpoint(src)
    eager = EagerAgent(spec, config, seed=9)
    eager.restore(result.dst)
    for name, value in eager.get_weights().items():
        np.testing.assert_array_equal(value, reader.get_tensor(name))
    assert int(eager.optimizer.iterations.numpy()) == 3

    restored = LegacyAgent(spec, config, seed=9)
    restored.restore(src)
    for _ in range(2):
        grads = random_grads(restored, rng)
        restored.apply_gradients(grads)
        eager.apply_gradients(grads)
    for name, value in restored.get_weights().items():
        np.testing.assert_allclose(eager.get_weights()[name], value, rtol=1e-12, atol=1e-15)
    restored.close()
    assert not [f for f in os.listdir(tmp_path / "tf2") if f.startswith(".tmp")]


def test_lstm_gaussian_with_env_spec_through_the_cli(tmp_path, capsys):
    envs = make_vec_env("BatteryArbitrage-v0", history=3)
    spec = spec_for_env(envs, torso="lstm", hidden=(8,))
    envs.close()
    legacy = LegacyAgent(spec, ReinforceConfig(), seed=1)
    src = legacy.save(str(tmp_path / "tf1" / "model"))
    dst = str(tmp_path / "tf2" / "policy")
    rc = main(["convert-checkpoint", src, dst, "--env", "BatteryArbitrage-v0", "--history", "3"])
    assert rc == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "optimizer state: adam (iterations 0)" in out
    # what the checkpoint could not say and the command did not give is flagged as assumed
    assert "note: activation tanh is the default, not read from SRC" in out
    assert "pass --activation (relu)" in out
    assert "note: learning rate 0.01 is ReinforceConfig's default, not SRC's" in out
    rc = main(["convert-checkpoint", src, dst + "2", "--env", "BatteryArbitrage-v0",
               "--history", "3", "--activation", "tanh", "--learning-rate", "0.01", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out.splitlines()[-1])["notes"] == []
    eager = EagerAgent(spec, ReinforceConfig(), seed=2)
    eager.restore(dst)
    obs = np.random.default_rng(0).uniform(0, 1, (16, *spec.obs_shape)).astype(np.float32)
    np.testing.assert_allclose(eager.dist_params(obs), legacy.dist_params(obs), rtol=1e-6, atol=1e-7)
    legacy.close()


def test_a_users_tf1_script_converts_with_name_maps(tmp_path, capsys):
    tf1_reinforce.main(["--iterations", "2", "--save", str(tmp_path / "tf1" / "model")])
    maps = ["actor/fc1/W=policy/dense_0/kernel", "actor/fc1/b=policy/dense_0/bias",
            "actor/fc2/W=policy/dense_1/kernel", "actor/fc2/b=policy/dense_1/bias",
            "actor/logits/W=policy/head/kernel", "actor/logits/b=policy/head/bias"]
    dst = str(tmp_path / "tf2" / "policy")
    argv = ["convert-checkpoint", str(tmp_path / "tf1"), dst, "--env", "CartPole-v1"]
    rc = main(argv + [x for m in maps for x in ("--map", m)])
    assert rc == 0, capsys.readouterr().err
    spec = PolicySpec("categorical", (4,), 2, hidden=(64, 64))
    eager = EagerAgent(spec, ReinforceConfig(), seed=5)
    eager.restore(dst)
    assert int(eager.optimizer.iterations.numpy()) == 2  # the script ran two train_ops
    reader = tf.train.load_checkpoint(str(tmp_path / "tf1"))
    for item in maps:
        old, new = item.split("=")
        np.testing.assert_array_equal(eager.get_weights()[new], reader.get_tensor(old))


def test_missing_extra_and_misshapen_variables_are_listed_and_nothing_is_written(tmp_path, capsys):
    src = write_tf1_checkpoint(str(tmp_path / "tf1" / "model"), {
        "policy/dense_0/kernel": np.zeros((4, 8), np.float32),
        "policy/head/kernel": np.zeros((8, 2), np.float32),
        "policy/head/bias": np.zeros(3, np.float32),
        "global_step": np.zeros((), np.int64),
    })
    out = tmp_path / "tf2"
    rc = main(["convert-checkpoint", src, str(out / "policy")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "missing ['policy/dense_0/bias']" in err
    assert "extra ['global_step']" in err
    assert "policy/head/bias: expected (2,), got (3,)" in err
    assert not out.exists() or not os.listdir(out)


@pytest.mark.parametrize("values, argv, message", [
    ({"policy/head/kernel": np.zeros((3, 2), np.float32)}, ["--map", "actor/W=policy/x"],
     "--map actor/W=policy/x: no variable in the checkpoint matches 'actor/W'"),
    ({"policy/head/kernel": np.zeros((3, 2), np.float32),
      "policy/head/bias": np.zeros(2, np.float32),
      "policy/head/kernel/Momentum": np.zeros((3, 2), np.float32),
      "policy/head/bias/Momentum": np.zeros(2, np.float32)}, [],
     "slots ['Momentum'] are not one Adam pair"),
    ({"actor/W": np.zeros((3, 2), np.float32)}, [], "missing ['policy/head/kernel']"),
])
def test_unconvertible_checkpoints_fail_with_the_reason(tmp_path, capsys, values, argv, message):
    src = write_tf1_checkpoint(str(tmp_path / "tf1" / "model"), values)
    assert main(["convert-checkpoint", src, str(tmp_path / "tf2" / "p"), *argv]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "tf2" / "p.index").exists()


def test_existing_destination_and_tf2_sources_are_refused(tmp_path, capsys):
    spec = PolicySpec("categorical", (2,), 2, hidden=(3,))
    eager = EagerAgent(spec, ReinforceConfig())
    tf2_ckpt = eager.save(str(tmp_path / "tf2" / "policy"))
    assert main(["convert-checkpoint", tf2_ckpt, str(tmp_path / "out" / "p")]) == 1
    assert "already a TF2 object-based checkpoint" in capsys.readouterr().err
    src = write_tf1_checkpoint(str(tmp_path / "tf1" / "m"),
                               {"policy/head/kernel": np.zeros((2, 2), np.float32)})
    assert main(["convert-checkpoint", src, tf2_ckpt]) == 1
    assert "exists" in capsys.readouterr().err


def test_src_may_name_a_file_of_the_checkpoint_and_a_missing_one_lists_those_there(tmp_path,
                                                                                   capsys):
    # TensorFlow reads a checkpoint by its prefix, and takes model-5.index for an empty one;
    # a Saver(max_to_keep=2) has deleted model-1.
    rng = np.random.default_rng(0)
    values = {"policy/dense_0/kernel": rng.standard_normal((2, 3)).astype(np.float32),
              "policy/dense_0/bias": np.zeros(3, np.float32),
              "policy/head/kernel": rng.standard_normal((3, 2)).astype(np.float32),
              "policy/head/bias": np.zeros(2, np.float32)}
    write_tf1_checkpoint(str(tmp_path / "tf1" / "model-3"), values)
    src = write_tf1_checkpoint(str(tmp_path / "tf1" / "model-5"), values)
    for i, given in enumerate((src + ".index", src + ".data-00000-of-00001")):
        dst = str(tmp_path / "tf2" / f"p{i}")
        assert main(["convert-checkpoint", given, dst]) == 0, capsys.readouterr().err
        assert f"read {src}\n" in capsys.readouterr().out
        eager = EagerAgent(PolicySpec("categorical", (2,), 2, hidden=(3,)), ReinforceConfig())
        eager.restore(dst)
        for name, value in values.items():
            np.testing.assert_array_equal(eager.get_weights()[name], value)
    missing = str(tmp_path / "tf1" / "model-1")
    assert main(["convert-checkpoint", missing, str(tmp_path / "tf2" / "q")]) == 1
    err = capsys.readouterr().err
    assert f"no TF1 checkpoint at {missing!r}: {missing + '.index'!r} does not exist; the " \
           f"checkpoints in {str(tmp_path / 'tf1')!r}: model-3, model-5" in err


def test_a_wrong_step_count_fails_verification_and_writes_nothing(tmp_path, monkeypatch):
    spec = PolicySpec("categorical", (3,), 2, hidden=(4,))
    legacy = LegacyAgent(spec, ReinforceConfig(), seed=0)
    rng = np.random.default_rng(1)
    for _ in range(2):
        legacy.apply_gradients(random_grads(legacy, rng))
    src = legacy.save(str(tmp_path / "tf1" / "model"))
    legacy.close()
    real = checkpoint_migration.adam_step_count
    monkeypatch.setattr(checkpoint_migration, "adam_step_count", lambda *a: real(*a) + 1)
    with pytest.raises(ConversionVerificationError) as err:
        convert_checkpoint(src, str(tmp_path / "tf2" / "policy"))
    # The legacy twin keeps the stored beta powers (t = 2), the eager one takes t = 3: the
    # bias corrections differ and so do the next steps.
    assert err.value.report.first_failure.rung == "weights"
    assert not (tmp_path / "tf2").exists()  # nor the directory made for it


def test_adam_step_count_from_beta_powers():
    b1, b2 = float(np.float32(0.9)), float(np.float32(0.999))
    # After t steps TF1 holds beta^(t+1), in float32.
    for t in (0, 1, 7, 500):
        assert adam_step_count(np.float32(b1 ** (t + 1)), np.float32(b2 ** (t + 1)), 0.9, 0.999) == t
    # beta1^(2001) underflows float32 to 0: beta2 alone says t = 2000.
    assert adam_step_count(np.float32(0.0), np.float32(b2 ** 2001), 0.9, 0.999) == 2000
    with pytest.raises(ValueError, match="do not come from one step count"):
        adam_step_count(np.float32(b1 ** 3), np.float32(b2 ** 6), 0.9, 0.999)


def test_bad_maps_are_refused():
    with pytest.raises(ValueError, match="is not OLD=NEW"):
        checkpoint_migration.parse_map(["actor/W"])
    with pytest.raises(ValueError, match="a scope"):
        checkpoint_migration.parse_map(["actor/=policy"])
    assert checkpoint_migration.parse_map(["a/=policy/"]) == {"a/": "policy/"}
    with pytest.raises(CheckpointMismatchError):
        raise CheckpointMismatchError("x", missing=["a"])


def _tf1_lstm_cell_logits(values, obs, forget_bias):
    """TF1's ``LSTMCell`` / ``BasicLSTMCell`` over ``obs [B, K, D]`` as its documentation and
    code define it, in numpy: ``[i, j, f, o] = [x, h] W + b``, ``c = s(f + forget_bias) c +
    s(i) tanh(j)``, ``h = s(o) tanh(c)``; then the dense head on the last h."""
    kernel, bias = values["rnn/lstm_cell/kernel"], values["rnn/lstm_cell/bias"]
    units = bias.shape[0] // 4
    h = c = np.zeros((obs.shape[0], units))
    sigmoid = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    for t in range(obs.shape[1]):
        i, j, f, o = np.split(np.concatenate([obs[:, t], h], 1) @ kernel + bias, 4, axis=1)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(j)
        h = sigmoid(o) * np.tanh(c)
    return h @ values["pi/kernel"] + values["pi/bias"]


@pytest.mark.parametrize("forget_bias", [1.0, 0.0])
def test_a_tf1_lstm_cell_is_converted_into_pgtwins_gate_order_with_its_forget_bias(
        tmp_path, forget_bias):
    # The gates (i, j, f, o in TF1's cell, i, f, g, o in pgtwin's) were copied as they
    # were and the forget bias left out: the conversion passed its own check (the two
    # twins agree with each other) and the policy was another (logits 0.4 apart).
    rng = np.random.default_rng(3)
    K, D, U, A = 5, 3, 4, 2
    values = {"rnn/lstm_cell/kernel": 0.5 * rng.standard_normal((D + U, 4 * U)),
              "rnn/lstm_cell/bias": 0.5 * rng.standard_normal(4 * U),
              "pi/kernel": rng.standard_normal((U, A)), "pi/bias": rng.standard_normal(A)}
    values = {n: x.astype(np.float32) for n, x in values.items()}  # as TF1 code saves them
    m = {n + "/Adam": (0.01 * rng.standard_normal(x.shape)).astype(np.float32)
         for n, x in values.items()}
    v = {n + "/Adam_1": (0.001 * rng.random(x.shape)).astype(np.float32)
         for n, x in values.items()}
    src = write_tf1_checkpoint(str(tmp_path / "tf1" / "model.ckpt"), {
        **values, **m, **v, "beta1_power": np.float32(0.9 ** 3), "beta2_power": np.float32(0.999 ** 3)})
    argv = ["convert-checkpoint", src, str(tmp_path / "tf2" / "ckpt"), "--history", str(K),
            "--map", "rnn/lstm_cell/=policy/lstm/", "--map", "pi/=policy/head/", "--json"]
    if forget_bias != 1.0:
        argv += ["--forget-bias", str(forget_bias)]
    assert main(argv) == 0
    spec = PolicySpec("categorical", (K, D), A, torso="lstm", hidden=(U,))
    agent = EagerAgent(spec, ReinforceConfig(dtype="float32"))
    agent.restore(str(tmp_path / "tf2" / "ckpt"))
    obs = rng.standard_normal((6, K, D))
    np.testing.assert_allclose(  # float32 arithmetic against the float64 oracle
        agent.dist_params(obs), _tf1_lstm_cell_logits(
            {n: x.astype(np.float64) for n, x in values.items()}, obs, forget_bias), atol=2e-6)
    # Adam's m moves with its columns: the forget gate's block of TF1's third quarter
    # (f) is pgtwin's second
    kernel_m = next(np.asarray(x) for x in agent.optimizer.variables
                    if "momentum" in x.name and tuple(x.shape) == (D + U, 4 * U))
    np.testing.assert_array_equal(kernel_m[:, U:2 * U], m["rnn/lstm_cell/kernel/Adam"][:, 2 * U:3 * U])
    np.testing.assert_array_equal(kernel_m[:, 2 * U:3 * U], m["rnn/lstm_cell/kernel/Adam"][:, U:2 * U])
