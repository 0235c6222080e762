"""Model state in the harness (pgtwin.parity.model_state): BatchNormalization's moving
statistics are paired, loaded from TF1, kept out of the harness's own forward passes, and
compared after every train step, so a migration that moves them differently fails.

Before, a Keras layer left at momentum 0.99 against TF1's 0.9 passed every rung: the
training-mode forward pass does not read the moving statistics, so no trainable row moved.
"""
from __future__ import annotations

import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.migrate.user_checkpoint import UserCheckpointError, convert_user_checkpoint
from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.programs import TF1Program, TF2Program
from pgtwin.parity.model_state import STATE_MOVED
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side
from tests import bn_programs as bn
from tests import user_programs as up

tf1 = tf.compat.v1
BATCH = bn.make_batch()
STATE = ["policy/bn1/moving_mean", "policy/bn1/moving_variance"]


@pytest.fixture(autouse=True)
def _seeded_keras():
    keras.utils.set_random_seed(0)


def failing(report):
    return [r for r in report.rows if not r.ok]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_faithful_batch_norm_migration_passes_with_its_state_compared(dtype):
    report = compare_programs(bn.tf1_program(dtype), bn.tf2_program(dtype), BATCH, steps=3)
    assert report.ok, report.to_table()
    last = [r for r in report.rows if r.rung == "weights" and "step 3/3" in r.context]
    # 5 trainable pairs (kernel, gamma, beta, head kernel and bias) and 2 state pairs
    assert len(last) == 7 and sum(r.item.split(" ->")[0] in STATE for r in last) == 2
    assert "State (not trained" in report.mapping_table


def test_a_keras_momentum_left_at_its_default_parts_at_the_moving_statistics():
    # TF1 moves m <- 0.9 m + 0.1 batch, Keras' default m <- 0.99 m + 0.01 batch: from the
    # same start the two steps differ by 10x. The weights and loss never see it.
    report = compare_programs(bn.tf1_program(), bn.tf2_program(momentum=0.99), BATCH)
    bad = failing(report)
    assert bad and {r.item.split(" ->")[0] for r in bad} == set(STATE), report.to_table()
    assert all("step 1/3" in r.context for r in bad)
    # the updates' ratio (1 - 0.9) / (1 - 0.99) = 10 gives TF1's momentum 1 - 10 x 0.01
    assert bad[0].note.startswith("TF1's update is that of momentum 0.9 (its decay), the "
                                  "Keras layer's momentum is 0.99: build it with momentum=0.9")
    # the part is 0.9 of the larger (TF1's) update: (0.1 - 0.01) / 0.1
    assert "0.9 of the step's largest change" in bad[0].note, bad[0].note


def test_a_batch_norm_epsilon_that_differs_is_named_at_the_outputs():
    # TF1 adds 1e-3 to the batch variance under its Rsqrt (tf.nn.batch_normalization); a
    # migration with PyTorch's 1e-5 normalises by sqrt(var + 1e-5): the outputs part first
    report = compare_programs(bn.tf1_program(), bn.tf2_program(epsilon=1e-5), BATCH)
    first = report.first_failure
    assert first.rung == "outputs", report.to_table()
    assert first.note.startswith("batch normalisation's epsilon differs: TF1's graph adds "
                                 "0.001 to the variance, the Keras BatchNormalization layers "
                                 "1e-05"), first.note


def test_a_tf1_train_op_without_its_update_ops_is_named():
    # The classic TF1 bug: minimize() outside tf.control_dependencies(UPDATE_OPS), so the
    # moving statistics never move; the Keras layer moves them in every training call.
    report = compare_programs(bn.tf1_program(run_update_ops=False), bn.tf2_program(), BATCH)
    bad = failing(report)
    assert bad and {r.item.split(" ->")[0] for r in bad} == set(STATE), report.to_table()
    assert bad[0].note.startswith(STATE_MOVED[1])


def test_a_name_map_for_state_is_applied_to_the_state():
    # the Keras layers are named as TF1's scopes: their paths are policy/bn1/moving_...
    swapped = {STATE[0]: STATE[1], STATE[1]: STATE[0]}
    report = compare_programs(bn.tf1_program(), bn.tf2_program(), BATCH, name_map=swapped)
    assert f"{STATE[0]} -> {STATE[1]}" in [r.item for r in report.rows]
    assert re.search(rf"{STATE[0]}\s+\(8,\)\s+{STATE[1]}\s+\(8,\)\s+name_map", report.mapping_table)
    # mean (0) against variance (1) from the start: the swap parts at step 1
    assert not report.ok and report.first_failure.item.startswith(STATE[0])


def test_the_harness_forward_passes_leave_the_state_as_it_was():
    legacy = TF1Side(bn.tf1_program(), BATCH)
    try:
        fed = {k: legacy.feed[ph] for k, ph in legacy.placeholders.items()}
        eager = TF2Side(bn.tf2_program(), fed)
        # built in __init__ (model.build), so the loss call that traces it is undone too
        np.testing.assert_array_equal(eager.state_values()[eager.state_infos()[0].name], 0.0)
        before1, before2 = legacy.state_values(), eager.state_values()
        for _ in range(2):
            legacy.run(), legacy.gradients(), eager.run()
        for before, after in ((before1, legacy.state_values()), (before2, eager.state_values())):
            assert before.keys() == after.keys() and len(before) == 2
            for name in before:
                np.testing.assert_array_equal(after[name], before[name])
        legacy.step()  # the train_op does move them
        assert not np.array_equal(legacy.state_values()[STATE[0]], before1[STATE[0]])
    finally:
        legacy.close()


def test_optimizer_slots_global_step_and_an_unused_critic_are_not_state():
    legacy = TF1Side(up.tf1_program(), up.make_batch())
    try:  # Adam's slots and beta powers, global_step, the critic: none is state
        assert legacy.state == {}
        assert "global_step" not in legacy.not_compared
    finally:
        legacy.close()


# ------------------------------------------------------------ convert-checkpoint --tf2
def _trained_checkpoint(tmp_path, count_steps: bool = False) -> str:
    """The TF1 policy after 3 train steps (its moving statistics moved, and with
    ``count_steps`` its global_step at 3), saved by a Saver."""
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(0)  # op determinism may be on in this process
        policy = bn.BatchNormPolicy(count_steps=count_steps)
        feed = {policy.obs_ph: BATCH["obs"], policy.act_ph: BATCH["actions"],
                policy.ret_ph: BATCH["returns"]}
        for _ in range(3):
            policy.sess.run(policy.train_op, feed)
        prefix = tf.compat.v1.train.Saver().save(policy.sess, str(tmp_path / "tf1" / "model"))
        policy.sess.close()
    return prefix


def _restored_state(path: str) -> dict[str, np.ndarray]:
    """The moving statistics of a fresh Keras migration restored from ``path``, as a user
    restores it."""
    agent = bn.KerasBatchNormAgent()
    tf.train.Checkpoint(model=agent.model).restore(path).expect_partial()
    layer = agent.model.get_layer("bn1")
    return {STATE[0]: layer.moving_mean.numpy(), STATE[1]: layer.moving_variance.numpy()}


@pytest.mark.parametrize("with_program", [True, False], ids=["tf1_program", "checkpoint_only"])
def test_converted_checkpoints_hold_the_tf1_moving_statistics(tmp_path, with_program):
    src = _trained_checkpoint(tmp_path)
    stored = tf.train.load_checkpoint(src)
    expected = {n: stored.get_tensor(n) for n in STATE}
    assert not np.allclose(expected[STATE[0]], 0.0)  # three steps moved them off 0 and 1
    dst = str(tmp_path / "tf2" / "policy")
    result = convert_user_checkpoint(src, dst, bn.tf1_program() if with_program else None,
                                     bn.tf2_program(), BATCH)
    assert not set(STATE) & set(result.not_converted)
    restored = _restored_state(dst)
    for name in STATE:
        np.testing.assert_array_equal(restored[name], expected[name])
    assert all(r.ok for r in result.report.rows if r.item.startswith(STATE[0]))


def test_state_without_a_tf1_value_is_refused_and_nothing_is_written(tmp_path):
    src = _trained_checkpoint(tmp_path)
    out = tmp_path / "tf2"
    with pytest.raises(UserCheckpointError) as err:
        convert_user_checkpoint(src, str(out / "policy"), bn.tf1_program(), bn.tf2_program(),
                                BATCH, drop=STATE)
    assert "TF2 policy/bn1/moving_mean (8,)" in str(err.value), str(err.value)
    assert "Nothing was written" in str(err.value)
    assert not out.exists() or os.listdir(out) == []


def test_convert_checkpoint_explains_old_code_instead_of_a_traceback(tmp_path, capsys):
    from pgtwin.cli import main

    src = _trained_checkpoint(tmp_path)
    np.savez(tmp_path / "batch.npz", **BATCH)
    argv = ["convert-checkpoint", src, str(tmp_path / "tf2" / "p"), "--tf2",
            "tests.bn_programs:tf2_program", "--tf1", "tests.compare_cases.contrib_program:tf1",
            "--inputs", str(tmp_path / "batch.npz")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("pgtwin convert-checkpoint: TF1Program.build uses tf.contrib"), err
    assert "import tf_slim as slim" in err and "Traceback" not in err
    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":  # too late once TensorFlow is imported
        with pytest.raises(SystemExit) as exit_info:
            main(argv + ["--legacy-keras"])
        assert exit_info.value.code == 2
        assert "--legacy-keras: TensorFlow is already imported" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_keras_schedule_goes_on_from_tf1s_global_step(tmp_path, kind):
    # TF1 trained 3 steps (global_step 3). A Keras SGD on ExponentialDecay(0.05, 2, 0.5)
    # restored with iterations 3 steps at 0.05 * 0.5 ** 1.5, not at its first rate 0.05.
    # A fresh Adam is left at 0 (its bias correction reads iterations too), with a note.
    def make():
        rate = keras.optimizers.schedules.ExponentialDecay(bn.LR, 2, 0.5)
        return keras.optimizers.SGD(rate) if kind == "sgd" else keras.optimizers.Adam(rate)

    src = _trained_checkpoint(tmp_path, count_steps=True)
    dst = str(tmp_path / "tf2" / "policy")
    result = convert_user_checkpoint(src, dst, bn.tf1_program(),
                                     bn.tf2_program(make_optimizer=make), BATCH)
    agent = bn.KerasBatchNormAgent(make_optimizer=make)
    agent.optimizer.build(agent.model.trainable_variables)
    tf.train.Checkpoint(model=agent.model, optimizer=agent.optimizer).restore(dst)
    if kind == "sgd":
        assert int(agent.optimizer.iterations.numpy()) == result.iterations == 3
        assert float(agent.optimizer.learning_rate.numpy()) == pytest.approx(
            bn.LR * 0.5 ** 1.5, rel=1e-6)
        assert "global_step" not in result.not_converted
        assert any("optimizer.iterations set to TF1's global_step 3" in n for n in result.notes)
    else:
        assert int(agent.optimizer.iterations.numpy()) == 0
        assert any("starts again from step 0, not TF1's global_step 3" in n
                   for n in result.notes)


@pytest.mark.parametrize("how", ["model", "layers"])
def test_a_frozen_target_network_is_state_on_both_sides_and_a_faithful_migration_passes(how):
    # Keras 3 keeps `trainable` on its own variable: the tf.Variable behind a frozen layer's
    # weight says trainable=True, and a tape watches it. It must still count as state, as
    # TF1's trainable=False variables do.
    from tests import target_programs as tp
    report = compare_programs(tp.tf1_program(), tp.tf2_program(how), tp.make_batch(), steps=2)
    assert report.ok, report.to_table()
    state = {p["tf1"]: p["tf2"] for p in report.pairs if p["role"] == "state"}
    assert state == {"target/w1": "target/target_h/kernel", "target/b1": "target/target_h/bias",
                     "target/w2": "target/target_v/kernel"}
    trained = [p["tf1"] for p in report.pairs if p["role"] == "trained"]
    assert trained == ["online/w1", "online/b1", "online/w2"]


def test_a_target_network_left_trainable_in_tf2_is_named_with_the_fix():
    from tests import target_programs as tp
    report = compare_programs(tp.tf1_program(), tp.tf2_program("forgotten"), tp.make_batch())
    assert not report.ok and report.first_failure.rung == "variables"
    notes = {r.item: r.note for r in report.rows if r.rung == "variables"}
    assert ("trained in TF2, while TF1 holds target/w1 of shape (3, 6) as state (not "
            "trainable): if it is a frozen copy (a target network), freeze the TF2 layer"
            ) in notes["TF2 target/target_h/kernel"]
    # the bias's message is this one too, not "the other side has no bias"
    assert "no bias" not in notes["TF2 target/target_h/bias"]
    assert "while TF2 trains target/target_h/bias" in notes["TF1 target/b1"]


def test_a_soft_target_update_at_another_rate_is_named_with_both_rates_ratio():
    # DDPG's t <- tau w + (1 - tau) t moves t by tau (w - t); from the same w and t the two
    # updates are tau_TF2 / tau_TF1 = 0.1 / 0.01 = 10 apart, all of them.
    from tests import target_programs as tp
    same = compare_programs(tp.tf1_program(tau=0.01), tp.tf2_program(tau=0.01),
                            tp.make_batch(), steps=2)
    assert same.ok, same.to_table()
    report = compare_programs(tp.tf1_program(tau=0.01), tp.tf2_program(tau=0.1),
                              tp.make_batch(), steps=2)
    bad = report.first_failure
    assert bad.item.startswith("target/") and "step 1/2" in bad.context, report.to_table()
    assert bad.note.startswith("TF2's update of this state variable is 10x TF1's, all of it: "
                               "a copy moved towards its source at another rate"), bad.note
    assert "in soft_update): give both the same tau" in bad.note


def test_a_target_update_only_tf1_runs_is_named_as_a_left_out_copy_not_batch_norm():
    from tests import target_programs as tp
    report = compare_programs(tp.tf1_program(tau=0.01), tp.tf2_program(), tp.make_batch(),
                              steps=1)
    bad = report.first_failure
    assert bad.note.startswith("TF1's train_op updated this state variable and the TF2 train "
                               "step did not: where it is a copy, such as a target network")
    assert "in soft_update): move it after apply_gradients" in bad.note
    assert "training=True" not in bad.note


def test_a_target_the_port_does_not_copy_at_the_start_is_named_at_the_initialisation_rung():
    # TF1's __init__ runs sess.run(sync) in its own Session: the program starts with
    # target == online. The harness takes that state, and the TF2 side must start its
    # target as a copy of its online network too; later rungs load TF1's values into both
    # sides, so they cannot see a port that forgot the copy.
    from tests import target_programs as tp
    faithful = compare_programs(tp.tf1_program(), tp.tf2_program(), tp.make_batch(), steps=1)
    copies = [r for r in faithful.rows if r.item.endswith(": initial copy")]
    assert [r.item.split(" ->")[0] for r in copies] == ["target/w1", "target/w2"]
    assert all(r.ok and r.note.startswith("starts as a copy of online/") for r in copies)
    forgot = compare_programs(tp.tf1_program(), tp.tf2_program(synced=False), tp.make_batch(),
                              steps=1)
    warned = [r for r in forgot.rows if r.item.endswith(": initial copy")]
    assert len(warned) == 2 and all(r.note.startswith(
        "WARNING TF1's program starts target/w") for r in warned), forgot.to_table()
    assert "copy it once built (target.set_weights(online.get_weights()))" in warned[0].note
    strict = compare_programs(tp.tf1_program(), tp.tf2_program(synced=False), tp.make_batch(),
                              steps=1, init="fail")
    assert strict.first_failure.item == warned[0].item


@pytest.mark.parametrize("how", ["model", "forgotten"])
def test_a_trainable_tf1_target_no_step_updates_pairs_with_a_frozen_or_unstepped_port(how):
    # Morvan-style DQN code: the target's variables are trainable but left out of
    # minimize(var_list=online), so no apply op updates them. Against the idiomatic port
    # (target.trainable = False) they are compared as state; against a port that leaves
    # its target trainable but never steps it, as weights that neither side moves.
    from tests import target_programs as tp
    report = compare_programs(tp.tf1_program(target_trainable=True), tp.tf2_program(how),
                              tp.make_batch(), steps=2)
    assert report.ok, report.to_table()
    held = [r.item for r in report.rows if r.note.startswith("compared as state: trainable, "
                                                             "but TF1's train_op never")]
    assert held == (["TF1 target/w1", "TF1 target/b1", "TF1 target/w2"] if how == "model"
                    else [])


def test_a_target_left_out_of_var_list_pairs_with_the_frozen_port_as_state():
    import dataclasses

    from tests import target_programs as tp
    program = dataclasses.replace(tp.tf1_program(target_trainable=True),
                                  var_list=["online/w1", "online/b1", "online/w2"])
    report = compare_programs(program, tp.tf2_program(), tp.make_batch(), steps=2)
    assert report.ok, report.to_table()
    unfrozen = compare_programs(program, tp.tf2_program("forgotten"), tp.make_batch(), steps=1)
    first = unfrozen.first_failure
    assert first.rung == "variables" and first.note.endswith(
        "which TF1Program.var_list leaves out: add them to var_list, or, if they are a frozen "
        "copy (a target network), freeze the TF2 layer (layer.trainable = False)"), first.note


def test_a_soft_update_rate_is_read_through_float32_rounding():
    # t <- t + tau (w - t) in float32, |w| ~ 0.3: TF1's update with tau 0.005 is ~1e-3 of a
    # unit and carries a few ulps (6e-8 each) of rounding, 1e-4 of itself: the ratio of
    # TF2's (tau 0.995) to it is 199 all the same, and says so.
    from pgtwin.parity.state_notes import copy_rate_note
    rng = np.random.default_rng(3)
    w = (0.3 * rng.normal(size=(32, 32))).astype(np.float32)
    t = (w + 0.01 * rng.normal(size=(32, 32))).astype(np.float32)
    after1 = (t + np.float32(0.005) * (w - t)).astype(np.float32)
    after2 = (t + np.float32(0.995) * (w - t)).astype(np.float32)
    d1, d2 = after1.astype(np.float64) - t, after2.astype(np.float64) - t
    eps = float(np.finfo(np.float32).eps)
    rounding = (eps * float(np.linalg.norm(after1)), eps * float(np.linalg.norm(after2)))
    assert copy_rate_note(d1, d2, "", rounding).startswith(
        "TF2's update of this state variable is 199x TF1's, all of it")
    # updates that are not one factor apart stay unexplained
    assert copy_rate_note(d1, d2 + 0.01 * rng.normal(size=d2.shape), "", rounding) == ""
    # a TF2 "update" of rounding size (-6e-5x TF1's: an average it never moved) is no rate
    assert copy_rate_note(d1, -5.8e-5 * d1, "", rounding) == ""


def test_an_interactive_sessions_values_are_the_starting_state_too():
    # Notebook code keeps a tf.InteractiveSession (not a tf.Session subclass): its synced
    # target is where the comparison starts, as with a plain Session.
    import dataclasses

    from tests import target_programs as tp
    tf1 = tf.compat.v1

    class Notebook(tp.TargetCritic):
        def __init__(self):
            super().__init__()
            values = self.sess.run(tf1.global_variables())
            self.sess.close()
            self.sess = tf1.InteractiveSession()
            for v, x in zip(tf1.global_variables(), values):
                v.load(x, self.sess)

    program = dataclasses.replace(tp.tf1_program(), build=Notebook)
    report = compare_programs(program, tp.tf2_program(), tp.make_batch(), steps=1)
    try:
        assert report.ok, report.to_table()
        copies = [r for r in report.rows if r.item.endswith(": initial copy")]
        assert len(copies) == 2 and all(r.ok for r in copies)
    finally:
        tf1.get_default_session() and tf1.get_default_session().close()


class _InferenceKeras(bn.KerasBatchNormAgent):
    """The port's loss calls the model as ``model(x)``: Keras runs its BatchNormalization in
    inference mode (the moving statistics), where the TF1 code normalises with the batch's."""

    def loss(self, b):
        logits = self.model(tf.cast(b["obs"], self.dtype))
        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(b["actions"], tf.int32), logits=logits)
        return {"loss": tf.reduce_mean(neglogp * tf.cast(b["returns"], self.dtype)),
                "logits": logits}


class _InferenceTF1(bn.BatchNormPolicy):
    """TF1 code whose forward pass normalises with its moving statistics (inference mode)."""

    def __init__(self):
        super().__init__()
        g = tf1.get_default_graph()
        with tf1.variable_scope("policy", reuse=True):
            w1, gamma, beta, mean, var, w2, b2 = (tf1.get_variable(n) for n in (
                "fc1/weights", "bn1/gamma", "bn1/beta", "bn1/moving_mean",
                "bn1/moving_variance", "out/weights", "out/biases"))
        h = tf.nn.relu(tf.nn.batch_normalization(tf.matmul(self.obs_ph, w1), mean, var, beta,
                                                 gamma, bn.EPSILON))
        self.logits = tf.matmul(h, w2) + b2
        self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=self.act_ph, logits=self.logits) * self.ret_ph)
        assert g is self.loss.graph


def test_batch_norm_run_in_another_mode_on_each_side_is_named_at_the_outputs():
    # TF1 normalises with the batch's moments (its loss reads no moving statistic); the port's
    # model(x) runs Keras' BatchNormalization in inference mode (the moving statistics, 0 and
    # 1 at the start): the outputs part, and the note says which side runs which mode.
    keras_inference = TF2Program(build=_InferenceKeras, loss=lambda a, b: a.loss(b),
                                 model="model")
    report = compare_programs(bn.tf1_program(), keras_inference, BATCH)
    first = report.first_failure
    assert first.rung == "outputs", report.to_table()
    assert first.note.startswith("batch normalisation runs in another mode on each side: "
                                 "TF1's forward pass normalises with the batch's moments "
                                 "(training mode"), first.note
    assert "call the model with training=True" in first.note
    # The other way round: TF1 reads its moving statistics, the port calls training=True
    # (it moves policy/bn1/moving_mean and moving_variance in its forward pass).
    tf1_inference = TF1Program(build=_InferenceTF1,
                               feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"},
                               loss="loss", outputs={"logits": "logits"}, train_op="train_op")
    report = compare_programs(tf1_inference, bn.tf2_program(), BATCH, steps=0)
    first = report.first_failure
    assert first.rung == "outputs", report.to_table()
    assert "its loss reads policy/bn1/moving_mean, policy/bn1/moving_variance: inference " \
           "mode" in first.note, first.note
    assert "call the model with training=False" in first.note
    # a faithful port (both in training mode) says nothing of the kind: it passes
    assert compare_programs(bn.tf1_program(), bn.tf2_program(), BATCH, steps=0).ok
