"""The ladder on user code as written (pgtwin.parity.code_parity): each rung passes and each catches
the migration mistake it is for, with a message that says what to fix.

The programs are in tests/user_programs.py. Expected numbers are derived in comments: a
reduce_sum over the batch of 32 is 32x the mean, and so on.
"""
from __future__ import annotations

import dataclasses
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity import compare
from pgtwin.parity.programs import TF1Program, TF2Program
from tests import user_programs as up

tf1 = tf.compat.v1
BATCH = up.make_batch()


@pytest.fixture(autouse=True)
def _seeded_keras():
    """The TF2 programs' Keras initializers are unseeded, so their one draw would depend on
    what the pytest worker ran before, and the initialisation rung's statistical check
    (alpha 1e-3 a variable) can then warn on a faithful migration (docs/benchmarks.md
    section 8). Seeded, each test sees one fixed draw."""
    keras.utils.set_random_seed(0)


def failing(report):
    return [r for r in report.rows if not r.ok]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_faithful_migration_passes_every_rung_with_the_users_own_optimizers(dtype):
    report = compare_programs(up.tf1_program(dtype), up.tf2_program(dtype), BATCH)
    assert report.ok, report.to_table()
    rungs = {r.rung for r in report.rows}
    assert rungs == {"variables", "initialisation", "outputs", "loss", "gradients", "weights"}
    # Keras numbers its layers per process (sequential_3/dense_6): compare what stays.
    pairs = [re.sub(r"_\d+", "", r.item) for r in report.rows if r.rung == "weights"][-4:]
    assert pairs == ["policy/fc1/weights -> sequential/dense/kernel",
                     "policy/fc1/biases -> sequential/dense/bias",
                     "policy/out/weights -> sequential/dense/kernel",
                     "policy/out/biases -> sequential/dense/bias"]
    assert "step 3/3" in report.rows[-1].context
    assert "creation order and shape" in report.mapping_table
    assert not report.warnings


def test_the_compare_entry_point_takes_programs_too():
    report = compare(up.tf1_program(), up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()


def test_a_critic_in_the_same_graph_is_not_compared_and_not_a_failure():
    # Regression: the critic (in neither loss) failed the variables rung.
    report = compare_programs(up.tf1_program(), up.tf2_program(), BATCH, steps=0)
    row = next(r for r in report.rows if r.item == "TF1 critic/v/weights")
    assert row.ok and "not compared" in row.note


def test_global_step_as_old_notebooks_make_it_is_found_and_incremented():
    # Regression: TypeError 'Existing "global_step" does not have integer type: resource'.
    side_report = compare_programs(up.tf1_program(), up.tf2_program(), BATCH, steps=2)
    assert side_report.ok, side_report.to_table()
    from pgtwin.parity.tf1_side import TF1Side
    side = TF1Side(up.tf1_program(), BATCH)
    try:
        side.step()
        side.step()
        step = side.session.run(side.obj.global_step)
        assert step == 2  # minimize(global_step=...) adds one per run
    finally:
        side.close()


def test_inputs_are_cast_to_the_declared_placeholder_dtypes_as_feed_dict_does():
    # Regression: int64 actions and float64 returns into int32/float32 placeholders.
    from pgtwin.parity.tf1_side import TF1Side
    side = TF1Side(up.tf1_program(), BATCH)
    try:
        fed = {k: side.feed[p] for k, p in side.placeholders.items()}
        assert fed["returns"].dtype == np.float32 and fed["actions"].dtype == np.int32
        np.testing.assert_array_equal(fed["actions"], BATCH["actions"])
    finally:
        side.close()


def test_a_value_the_cast_would_change_is_refused_naming_input_placeholder_and_dtypes():
    from pgtwin.parity.tf1_side import FeedError
    batch = dict(BATCH, actions=BATCH["actions"] + 0.5)
    with pytest.raises(FeedError) as err:
        compare_programs(up.tf1_program(), up.tf2_program(), batch)
    text = str(err.value)
    assert "inputs['actions'] (float64" in text and "'actions' (int32" in text
    # the first action plus 0.5 is the first value that is not an integer
    assert f"value {BATCH['actions'][0] + 0.5} at index (0,) is not an integer" in text


def test_keras_default_epsilon_is_named_at_the_weights_rung():
    bad = compare_programs(up.tf1_program(), up.tf2_keras_epsilon(), BATCH).first_failure
    assert (bad.rung, bad.item) == ("weights", "optimizer.epsilon")
    assert "write epsilon=1e-8" in bad.note


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rmsprop_with_tf1s_settings_parts_at_the_mean_squares_start_until_it_is_one(dtype):
    # TF1's RMSPropOptimizer starts its mean square at 1 and Keras' RMSprop at 0; both put
    # epsilon inside the square root. With TF1's settings (rho 0.9, epsilon 1e-10) the
    # weights part at step 1 and the note says why; with the velocities set to 1 first,
    # every rung passes: nothing else differs.
    report = compare_programs(up.tf1_rmsprop_program(dtype),
                              up.tf2_program(dtype, rmsprop_start=0.0), BATCH)
    bad = failing(report)
    assert bad and {r.rung for r in bad} == {"weights"}, report.to_table()
    assert "step 1/3" in bad[0].context
    assert "starts its mean square (its 'rms' slot) at 1.0" in bad[0].note
    assert not any("outside" in r.note for r in report.rows)
    report = compare_programs(up.tf1_rmsprop_program(dtype),
                              up.tf2_program(dtype, rmsprop_start=1.0), BATCH)
    assert report.ok, report.to_table()
    assert not any("mean square" in r.note or "beta_2" in r.note for r in report.rows)


class LazyOnesRMSprop(up.KerasAgent):
    """A port that builds its RMSprop and sets the velocities to TF1's start (1, or
    ``start``) inside its first train step, not in ``__init__``."""

    def __init__(self, start, **options):
        super().__init__(**options)
        self.optimizer = keras.optimizers.RMSprop(up.LR, rho=0.9, epsilon=1e-10)
        self.start = start

    def train_step(self, obs, actions, returns):
        if not self.optimizer.built:
            self.optimizer.build(self.model.trainable_variables)
            for v in self.optimizer.variables:
                if "velocity" in v.name:
                    v.assign(tf.fill(v.shape, tf.cast(self.start, v.dtype)))
        super().train_step(obs, actions, returns)


@pytest.mark.parametrize("start", [1.0, 0.0])
def test_velocities_set_in_the_first_train_step_are_read_after_it(start):
    """Velocities at 1 set lazily: the start is right, and the part of a train step that
    minimises twice the loss is not blamed on it. At 0 it is."""
    tf2 = dataclasses.replace(up.tf2_program(), build=lambda: LazyOnesRMSprop(
        start, train_loss_scale=2.0))
    bad = failing(compare_programs(up.tf1_rmsprop_program(), tf2, BATCH))
    assert bad and all(r.rung == "weights" for r in bad)
    blamed = ["starts its mean square (its 'rms' slot) at 1.0" in r.note for r in bad]
    assert all(blamed) if start == 0.0 else not any(blamed), bad[0].note


def test_a_clipping_left_out_is_caught_at_adams_first_step_by_the_gradient_taken():
    # TF1 clips the gradients' global norm to 0.05 before Adam; the migration does not clip.
    # Adam's first step is lr * g / (|g| + eps) either way, so the weights agree after it,
    # but Adam's m holds (1 - beta_1) times the clipped gradient in TF1, the whole one in
    # TF2.
    optimizer = keras.optimizers.Adam(1e-4, epsilon=1e-8)
    report = compare_programs(up.tf1_clipped_program(1e-4, 0.05),
                              up.tf2_program(optimizer=optimizer), BATCH, steps=3)
    bad = failing(report)
    gradients = [r for r in bad if r.item.endswith("train step's gradient")]
    assert len(gradients) == 4 and all("step 1/3" in r.context for r in bad), report.to_table()
    # TF2's gradient is TF1's times one factor c > 1 (TF1's scaled down to norm 0.05)
    assert all(re.match(r"the TF2 train step's gradient is [\d.]+x TF1's, all of it: TF1 clips "
                        r"the gradients by their global norm in its graph and the Keras "
                        r"optimizer does not clip: set global_clipnorm", r.note)
               for r in gradients), gradients[0].note
    assert all("set global_clipnorm" in r.note for r in bad)  # the weights rows' too
    optimizer = keras.optimizers.Adam(1e-4, epsilon=1e-8, global_clipnorm=0.05)
    report = compare_programs(up.tf1_clipped_program(1e-4, 0.05),
                              up.tf2_program(optimizer=optimizer), BATCH, steps=3)
    assert report.ok, report.to_table()


def test_a_clipping_left_out_parts_at_a_small_learning_rate():
    # TF1 clips the gradients' global norm to 0.05 before plain gradient descent at lr 1e-4;
    # the migration does not clip. The first step then differs by lr (1 - 0.05 / |g|) g, a
    # part of a step of ~1e-4: under the default float32 atol of 1e-4, over 1% of the step.
    lr = 1e-4
    tf1_program = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(
        lr=lr, clip_norm=0.05, optimizer=tf1.train.GradientDescentOptimizer))
    report = compare_programs(tf1_program, up.tf2_program(optimizer=keras.optimizers.SGD(lr)),
                              BATCH, steps=3)
    bad = failing(report)
    assert bad and {r.rung for r in bad} == {"weights"}, report.to_table()
    assert all(r.max_abs < 1e-4 for r in bad)  # what the fixed atol let pass
    for r in bad:  # the note gives the part against the step, the size the check is about
        found = re.search(r"the weights part by ([-+.e\d]+), ([-+.e\d]+) of the step's "
                          r"largest change \(([-+.e\d]+)\)", r.note)
        assert found, r.note
        part, fraction, step = (float(x) for x in found.groups())
        assert part == pytest.approx(r.max_abs, rel=1e-2)
        assert fraction == pytest.approx(part / step, rel=1e-2) and fraction > 1e-2
    assert all(r.note.startswith("TF1 clips the gradients by their global norm in its graph "
                                 "and the Keras optimizer does not clip: set global_clipnorm")
               for r in bad), bad[0].note
    report = compare_programs(tf1_program, up.tf2_program(
        optimizer=keras.optimizers.SGD(lr, global_clipnorm=0.05)), BATCH, steps=3)
    assert report.ok, report.to_table()


def _tf1_decayed(make, decay=0.5, **options):
    """The TF1 class with an optimizer whose rate is multiplied by ``decay`` every 2 steps
    of its global_step (staircase), as old code built it."""
    def factory(lr):
        rate = tf1.train.exponential_decay(lr, tf1.train.get_global_step(), 2, decay,
                                           staircase=True)
        return make(rate, **options)
    return dataclasses.replace(up.tf1_program(),
                               build=lambda: up.PolicyGradient(optimizer=factory))


def test_learning_rates_are_compared_again_before_every_step():
    # TF1: 0.01 * 0.5 ** floor(t / 2); Keras without staircase: 0.01 * 0.5 ** (t / 2). At
    # t = 1, before step 2: 0.01 against 0.01 / sqrt(2) = 0.00707107.
    keras_rate = keras.optimizers.schedules.ExponentialDecay(up.LR, 2, 0.5, staircase=False)
    report = compare_programs(_tf1_decayed(tf1.train.GradientDescentOptimizer),
                              up.tf2_program(optimizer=keras.optimizers.SGD(keras_rate)), BATCH)
    first = report.first_failure
    assert (first.item, "step 2/3" in first.context) == ("optimizer.learning_rate", True)
    assert "TF1's learning rate is 0.01 and SGD's 0.00707107" in first.note
    assert first.note.endswith("the schedules differ: TF1's rate is tf.compat.v1.train."
                               "exponential_decay, the Keras optimizer's is ExponentialDecay("
                               "initial_learning_rate=0.01, decay_steps=2, decay_rate=0.5, "
                               "staircase=False); compare their decay_steps, decay_rate and "
                               "staircase"), first.note


def test_a_schedule_that_differs_is_named_by_each_sides_schedule():
    # TF1: polynomial_decay(0.01, t, 10, 0.001) (power 1: 0.01 - 0.0009 t); the port's rate
    # is fixed: they part before step 2 (0.0091 against 0.01), and the note names TF1's
    # schedule and the Keras one that computes it, with their shared settings. (Before, it
    # said to compare exponential_decay's decay_rate and staircase.)
    def factory(lr):
        rate = tf1.train.polynomial_decay(lr, tf1.train.get_global_step(), 10, 0.001)
        return tf1.train.GradientDescentOptimizer(rate)
    program = dataclasses.replace(up.tf1_program(),
                                  build=lambda: up.PolicyGradient(optimizer=factory))
    report = compare_programs(program, up.tf2_program(
        optimizer=keras.optimizers.SGD(up.LR)), BATCH)
    first = report.first_failure
    assert (first.item, "step 2/3" in first.context) == ("optimizer.learning_rate", True)
    assert "TF1's learning rate is 0.0091 and SGD's 0.01" in first.note, first.note
    assert first.note.endswith(
        "the schedules differ: TF1's rate is tf.compat.v1.train.polynomial_decay, the Keras "
        "optimizer's rate is fixed: give it keras.optimizers.schedules.PolynomialDecay; "
        "compare their decay_steps, end_learning_rate, power and cycle"), first.note


def test_a_fed_rate_against_a_keras_schedule_is_told_as_fed_not_as_schedules():
    """TF1's rate is a placeholder the loop feeds (A2C's linear schedule); the harness feeds
    it the batch's value, halved from step 2, so a Keras schedule of its own parts at step
    2, and the note says the TF2 step does not take the input, not to compare
    exponential_decay's settings."""
    def fed_rate(lr):
        return tf1.train.GradientDescentOptimizer(tf1.placeholder(tf.float32, [], name="LR"))
    program = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(
        optimizer=fed_rate), feeds={**up.tf1_program().feeds, "lr": "LR:0"})
    keras_rate = keras.optimizers.schedules.PolynomialDecay(up.LR, 10, 0.0)
    report = compare_programs(program, up.tf2_program(optimizer=keras.optimizers.SGD(
        keras_rate)), {**BATCH, "lr": np.float64(up.LR)})
    first = report.first_failure
    assert first.rung == "weights" and "step 2/3" in first.context, report.to_table()
    assert first.note.startswith("from this step the scalars TF1's train_op reads moved "
                                 "(inputs['lr'] 0.01 -> 0.005) on both sides"), first.note
    assert "the TF2 train step does not take inputs['lr']" in first.note
    assert "exponential_decay" not in first.note


def test_a_port_that_ignores_the_fed_rate_for_an_equal_fixed_one_parts_at_step_2():
    # PPO2's LR placeholder fed 0.01, and a port whose SGD is built with 0.01 and never
    # reads batch["lr"]: with one value at every step it passed every rung; the harness
    # now halves the input from step 2, and only a port that takes it agrees
    def fed_rate(lr):
        return tf1.train.GradientDescentOptimizer(tf1.placeholder(tf.float32, [], name="LR"))
    program = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(
        optimizer=fed_rate), feeds={**up.tf1_program().feeds, "lr": "LR:0"})
    batch = {**BATCH, "lr": np.float64(up.LR)}
    fixed = compare_programs(program, up.tf2_program(optimizer=keras.optimizers.SGD(up.LR)),
                             batch)
    assert not fixed.ok and "step 2/3" in fixed.first_failure.context
    assert "does not take inputs['lr']" in fixed.first_failure.note
    taking_program = up.tf2_program(optimizer=keras.optimizers.SGD(up.LR))

    def takes_rate(agent, b):  # as annealed-rate code does: the rate from the batch
        agent.optimizer.learning_rate.assign(tf.cast(b["lr"], tf.float32))
        agent.train_step(b["obs"], b["actions"], b["returns"])
    taking = compare_programs(program, dataclasses.replace(taking_program,
                                                           train_step=takes_rate), batch)
    assert taking.ok, taking.to_table()
    assert any(r.item == "fed scalars" for r in taking.rows)


@pytest.mark.parametrize("decay", [0.5, 1.0])
def test_momentum_under_a_decaying_rate_parts_by_design_and_says_so(decay):
    # TF1's Momentum: a <- 0.9 a + g, w <- w - lr_t a; Keras' SGD: v <- 0.9 v - lr_t g,
    # w <- w + v. Equal while lr_t is constant: steps 1 and 2 (0.01); at step 3 the rate
    # halves (staircase, every 2 steps) and they part. With decay 1.0 they never do.
    program = _tf1_decayed(tf1.train.MomentumOptimizer, decay, momentum=0.9)
    keras_rate = keras.optimizers.schedules.ExponentialDecay(up.LR, 2, decay, staircase=True)
    report = compare_programs(program, up.tf2_program(
        optimizer=keras.optimizers.SGD(keras_rate, momentum=0.9)), BATCH, steps=4)
    if decay == 1.0:
        assert report.ok, report.to_table()
        return
    first = report.first_failure
    assert first.rung == "weights" and "step 3/4" in first.context, report.to_table()
    assert "TF1's MomentumOptimizer multiplies its whole accumulated momentum" in first.note


@pytest.mark.parametrize("keras_l2, hint", [
    (None, "the TF2 loss is TF1's less its regularization loss"),
    (0.01, "Keras' l2(s) is s * sum(w ** 2): build the Keras regularizer with l2(s / 2)"),
    (0.005, None),
])
def test_a_regularization_loss_left_out_or_doubled_is_named(keras_l2, hint):
    # TF1: 0.01 * tf.nn.l2_loss(W1) = 0.01 * sum(W1 ** 2) / 2 in the loss. Keras' l2(s) adds
    # s * sum(W1 ** 2): l2(0.01) is twice TF1's term, l2(0.005) is TF1's, none is missing it.
    program = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(l2=0.01))
    report = compare_programs(program, up.tf2_program(l2=keras_l2), BATCH, steps=1)
    if hint is None:
        assert report.ok, report.to_table()
        return
    first = report.first_failure
    assert (first.rung, first.item) == ("loss", "loss") and hint in first.note, first.note


def test_sum_instead_of_mean_is_named_with_the_batch_size():
    report = compare_programs(up.tf1_program(), up.tf2_program(reduce=tf.reduce_sum), BATCH)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("loss", "loss")
    # sum over 32 samples = 32 x their mean
    assert "32x the TF1 loss" in bad.note and "reduce_sum" in bad.note


def test_from_logits_left_at_its_default_is_named():
    report = compare_programs(up.tf1_program(), up.tf2_program(from_logits=False), BATCH)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("loss", "loss")
    assert "from_logits=True" in bad.note
    # the train steps' gradients part too, as they must: said to follow from the loss
    taken = [r for r in report.rows if r.item.endswith("train step's gradient") and not r.ok]
    assert taken and all(r.note.startswith("follows from the outputs, loss or gradients that "
                                           "parted on an earlier rung") for r in taken)


def test_a_softmax_on_the_last_layer_is_named_at_the_outputs_rung():
    report = compare_programs(up.tf1_program(), up.tf2_program(last_activation="softmax"),
                              BATCH, steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "logits")
    assert "probabilities" in bad.note and "softmax activation" in bad.note


def test_a_double_softmax_is_named_at_the_loss_rung():
    def loss(agent, b):  # probabilities handed to a loss that takes logits
        probs = agent.model(b["obs"])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["actions"], logits=probs)
        return tf.reduce_mean(ce * b["returns"])

    program = TF2Program(build=lambda: up.KerasAgent(last_activation="softmax"), loss=loss)
    tf1_loss_only = dataclasses.replace(up.tf1_program(), outputs={})
    bad = compare_programs(tf1_loss_only, program, BATCH, steps=0).first_failure
    assert (bad.rung, bad.item) == ("loss", "loss")
    assert "softmax applied twice" in bad.note


def test_a_different_initializer_warns_by_default_and_fails_when_asked():
    # he_normal's std sqrt(2/4) = 0.71 vs glorot_uniform's sqrt(2/(4+16)) = 0.32 on fc1.
    wrong = up.tf2_program(kernel_initializer="he_normal")
    report = compare_programs(up.tf1_program(), wrong, BATCH, steps=0)
    assert report.ok
    warned = [r for r in report.warnings if r.rung == "initialisation"]
    assert warned and warned[0].item.startswith("policy/fc1/weights")
    assert "HeNormal" in warned[0].note and "kernel_initializer" in warned[0].note
    strict = compare_programs(up.tf1_program(), wrong, BATCH, steps=0, init="fail")
    assert strict.first_failure.rung == "initialisation"


def test_a_train_step_that_updates_the_wrong_variables_is_named():
    report = compare_programs(up.tf1_program(), up.tf2_program(train_last_layer_only=True),
                              BATCH, steps=1)
    bad = report.first_failure
    assert bad.rung == "weights" and bad.item.startswith("policy/fc1/weights")
    assert "did not change this variable" in bad.note


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_train_steps_gradient_is_read_from_adams_first_moment(dtype):
    # After one step from m = 0, m = (1 - beta_1) g: the rows recover g on both sides. A
    # faithful migration takes the loss's gradient in its train step.
    report = compare_programs(up.tf1_program(dtype), up.tf2_program(dtype), BATCH, steps=3)
    assert report.ok, report.to_table()
    # kept in a passing report of several steps, which shows the last step's weights only
    rows = [r for r in report.rows if r.item.endswith("train step's gradient")]
    assert len(rows) == 4 and all("step 1/3" in r.context for r in rows)


def test_a_train_step_minimising_twice_the_loss_is_caught_though_adam_hides_it():
    # (A train step that drops a term instead, the entropy bonus, parts by no common factor:
    # test_a_train_step_that_drops_a_term_is_told_so.)
    # Adam's step lr m / (sqrt(v) + eps) is the same for g and 2g but for eps (1e-8 against
    # |g| ~ 1e-2): the weights agree after every step, and only the gradient the train step
    # took, 2g against g (max_rel 1/2), shows the doubled loss.
    report = compare_programs(up.tf1_program(), up.tf2_program(train_loss_scale=2.0), BATCH,
                              steps=3)
    bad = failing(report)
    assert {r.item.split(" ->")[0] for r in bad} == {"policy/fc1/weights", "policy/fc1/biases",
                                                     "policy/out/weights", "policy/out/biases"}
    assert all(r.item.endswith("train step's gradient") and "step 1/3" in r.context
               for r in bad), report.to_table()
    assert all(abs(r.max_rel - 0.5) < 1e-4 for r in bad)
    assert bad[0].note.startswith("the TF2 train step's gradient is 2x TF1's, all of it: a "
                                  "loss scaled in the train step")
    weights = [r for r in report.rows if "step 1/3" in r.context and r.item.endswith("kernel")]
    assert weights and all(r.ok for r in weights)  # what the weights alone say


def test_a_train_step_that_drops_a_term_is_told_so():
    # A term only the TF2 train step has changes the gradient by no common factor.
    report = compare_programs(up.tf1_program(), up.tf2_program(train_extra_term=0.1), BATCH,
                              steps=1)
    bad = report.first_failure
    assert bad.item.endswith("train step's gradient"), report.to_table()
    assert bad.note.startswith("the gradient the train step took (from Adam's first moment) "
                                  "parts: where the gradients rung passed, the TF2 train step "
                                  "minimises another loss than TF2Program.loss")


def test_a_train_step_that_raises_after_setting_its_rate_is_named_first():
    # The summary named the rate row (Adam(3e-4) before the step) and not the step that
    # raised: the rate the step had set was not read again.
    program = up.tf2_program(optimizer=keras.optimizers.Adam(3e-4, epsilon=1e-8),
                             train_sets_rate=up.LR)

    def raising_step(obj, batch):
        obj.optimizer.learning_rate.assign(up.LR)
        raise ValueError("Unknown variable: vf/kernel")

    program = dataclasses.replace(program, train_step=raising_step)
    report = compare_programs(up.tf1_program(), program, BATCH, steps=1)
    assert report.first_failure.item == "train step", report.to_table()
    # where it raised comes first: the user's file and line
    assert re.match(r"the TF2 train step raised ValueError in \S+test_code_parity.py:\d+ in "
                    r"raising_step: ", report.first_failure.note), report.first_failure.note
    assert "(Unknown variable: vf/kernel)" in report.first_failure.note


def test_a_rate_the_train_step_sets_is_read_after_the_step_it_sets_it_for():
    # Built with Adam(3e-4), the step assigns TF1's 1e-2 before it applies: the rate read
    # before any step was not the one the step used.
    optimizer = keras.optimizers.Adam(3e-4, epsilon=1e-8)
    report = compare_programs(up.tf1_program(), up.tf2_program(
        optimizer=optimizer, train_sets_rate=up.LR), BATCH, steps=2)
    assert report.ok, report.to_table()
    [rate] = [r for r in report.rows if r.item == "optimizer.learning_rate"]
    assert rate.note.endswith(f"before the first step; the TF2 train step sets {up.LR:g}, "
                              "TF1's rate (read after it)")
    # A rate the step does not set still fails
    report = compare_programs(up.tf1_program(), up.tf2_program(
        optimizer=keras.optimizers.Adam(3e-4, epsilon=1e-8)), BATCH, steps=1)
    assert report.first_failure.item == "optimizer.learning_rate"


def test_keras_clipping_of_another_kind_than_tf1s_fails_even_where_no_gradient_is_clipped():
    # TF1 clips the global norm at 1e3, above this batch's: the weights agree, but Keras'
    # clipnorm clips each gradient by its own norm, another rule on a batch that clips.
    report = compare_programs(up.tf1_clipped_program(up.LR, 1e3), up.tf2_program(
        optimizer=keras.optimizers.Adam(up.LR, epsilon=1e-8, clipnorm=1e3)), BATCH, steps=1)
    [row] = failing(report)
    assert row.item == "optimizer.clipnorm"
    assert row.note.startswith("TF1 clips the gradients by their global norm in its graph and "
                               "Adam has clipnorm=1000: use global_clipnorm")
    # Keras clipping where TF1's graph has no clipping op: a warning
    report = compare_programs(up.tf1_program(), up.tf2_program(
        optimizer=keras.optimizers.Adam(up.LR, epsilon=1e-8, clipnorm=1e3)), BATCH, steps=1)
    assert report.ok and report.warnings[0].item == "optimizer.clipnorm"


def test_a_keras_clipping_threshold_other_than_tf1s_fails_naming_both():
    """TF1's clip_norm is read from its graph (``tf.clip_by_global_norm``'s ``mul``); the
    Keras optimizer's global_clipnorm of another value fails at its row, with the fix."""
    optimizer = keras.optimizers.Adam(up.LR, epsilon=1e-8, global_clipnorm=0.1)
    report = compare_programs(up.tf1_clipped_program(up.LR, 0.05),
                              up.tf2_program(optimizer=optimizer), BATCH, steps=1)
    first = report.first_failure
    assert first.item == "optimizer.global_clipnorm", report.to_table()
    assert first.note == ("TF1 clips the gradients by their global norm at 0.05 in its graph "
                          "and Adam has global_clipnorm=0.1: write global_clipnorm=0.05")
    assert first.max_abs == pytest.approx(0.05)
    right = keras.optimizers.Adam(up.LR, epsilon=1e-8, global_clipnorm=0.05)
    report = compare_programs(up.tf1_clipped_program(up.LR, 0.05),
                              up.tf2_program(optimizer=right), BATCH, steps=1)
    assert report.ok, report.to_table()
    assert [r.note for r in report.rows if r.item == "optimizer.global_clipnorm"] == [
        "TF1 clips by their global norm at 0.05 too"]


@pytest.mark.parametrize("keras_clip", [None, 1e3])
def test_a_clip_that_does_not_act_on_the_batch_warns_that_no_clipping_was_tested(keras_clip):
    """Clip norm 1e3 is far over this batch's gradient norm (about 1), so TF1 applies the
    loss's gradients unclipped: a port without the clip passes, and the clipping row warns
    that the batch tested none. At 0.05 the clip acts, and nothing warns."""
    optimizer = keras.optimizers.Adam(up.LR, epsilon=1e-8, global_clipnorm=keras_clip)
    report = compare_programs(up.tf1_clipped_program(up.LR, 1e3),
                              up.tf2_program(optimizer=optimizer), BATCH, steps=1)
    assert report.ok, report.to_table()
    [warned] = report.warnings
    assert warned.item == ("optimizer.clipping" if keras_clip is None
                           else "optimizer.global_clipnorm")
    assert warned.note.startswith("WARNING TF1 clips the gradients by their global norm at "
                                  "1000, but on this batch the clip does not act")
    acting = keras.optimizers.Adam(up.LR, epsilon=1e-8, global_clipnorm=0.05)
    report = compare_programs(up.tf1_clipped_program(up.LR, 0.05),
                              up.tf2_program(optimizer=acting), BATCH, steps=1)
    assert report.ok and not report.warnings, report.to_table()


def test_the_epsilon_note_gives_tf1s_own_epsilon():
    tf1_program = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(
        optimizer=lambda lr: tf1.train.AdamOptimizer(lr, epsilon=1e-5)))
    report = compare_programs(tf1_program, up.tf2_program(epsilon=1e-7), BATCH, steps=1)
    assert report.first_failure.note.endswith("write epsilon=1e-5)")


def test_a_keras_dense_that_gained_a_bias_is_told_use_bias_not_to_map_a_kernel():
    def no_out_bias(ph_dtype="float32"):
        return TF1Program(build=_tf1_without_out_bias, feeds={"obs": "obs", "actions": "a",
                                                              "returns": "r"}, loss="loss")
    report = compare_programs(no_out_bias(), up.tf2_program(), BATCH, steps=0)
    bad = report.first_failure
    assert bad.rung == "variables" and re.fullmatch(r"TF2 sequential\w*/dense\w*/bias", bad.item)
    assert "use_bias=False" in bad.note and "kernel" not in bad.note.split("use_bias")[0]


def _tf1_without_out_bias():
    obs = tf1.placeholder(tf.float32, [None, up.OBS], name="obs")
    a = tf1.placeholder(tf.int32, [None], name="a")
    r = tf1.placeholder(tf.float32, [None], name="r")
    w1 = tf1.get_variable("fc1/W", [up.OBS, up.HIDDEN])
    b1 = tf1.get_variable("fc1/b", [up.HIDDEN], initializer=tf1.zeros_initializer())
    w2 = tf1.get_variable("out/W", [up.HIDDEN, up.ACTIONS])
    logits = tf.tanh(obs @ w1 + b1) @ w2
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=a, logits=logits)
    return {"loss": tf.reduce_mean(ce * r)}


@pytest.mark.parametrize("legacy", [False, True])
def test_a_tf_keras_optimizer_with_the_right_settings_passes_the_function_contract(legacy):
    # Regression: "different optimizers" for a tf_keras Adam whose weights matched.
    import tf_keras
    from tests.test_parity_harness import run
    make = tf_keras.optimizers.legacy.Adam if legacy else tf_keras.optimizers.Adam
    pair = (lambda: tf1.train.AdamOptimizer(0.1), lambda: make(0.1, epsilon=1e-8))
    report = run(optimizer=pair, dtype="float32")
    assert report.ok, report.to_table()
    assert any(r.item == "optimizer.epsilon" and r.ok for r in report.rows)


def test_a_tf_keras_model_is_compared_on_its_own_variables():
    tf_keras = pytest.importorskip("tf_keras")

    class LegacyAgent:
        def __init__(self):
            self.model = tf_keras.Sequential([tf_keras.layers.Dense(up.HIDDEN, "tanh"),
                                              tf_keras.layers.Dense(up.ACTIONS)])
            self.optimizer = tf_keras.optimizers.Adam(up.LR, epsilon=1e-8)

        def loss(self, b):
            logits = self.model(b["obs"])
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["actions"],
                                                                logits=logits)
            return {"loss": tf.reduce_mean(ce * b["returns"]), "logits": logits}

    program = TF2Program(build=LegacyAgent, loss=lambda a, b: a.loss(b), model="model")
    report = compare_programs(up.tf1_program(), program, BATCH, steps=2)
    assert report.ok, report.to_table()


def test_a_tf1_program_that_switches_eager_off_is_refused_at_its_line():
    def build():
        tf1.disable_v2_behavior()

    program = TF1Program(build=build, feeds={}, loss="loss")
    from pgtwin.parity.code_checks import EagerSwitchedOffError
    with pytest.raises(EagerSwitchedOffError) as err:
        compare_programs(program, up.tf2_program(), BATCH)
    assert "test_code_parity.py" in str(err.value) and "delete the line" in str(err.value)
    assert tf.executing_eagerly()  # the call was refused, not made


@pytest.mark.parametrize("value, said", [
    ("0", "TF_USE_LEGACY_KERAS is set to '0', which leaves it off: set it to 1"),
    ("1", "TF_USE_LEGACY_KERAS is set, but tf_keras is not importable"),
    (None, None)])
def test_the_legacy_keras_message_says_what_tf_use_legacy_keras_is_set_to(monkeypatch, value,
                                                                          said):
    """TensorFlow reads only 1, true and True as on: a 0 is told as off, not as tf_keras
    missing (the message once said that with tf_keras installed)."""
    from pgtwin.parity.code_checks import explain_build_error
    if value is None:
        monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    else:
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", value)
    err = explain_build_error(AttributeError("`dense` is not available with Keras 3."),
                              "TF1Program.build")
    assert "uses tf.compat.v1.layers.dense," in str(err)
    if said is None:
        assert "TF_USE_LEGACY_KERAS is set" not in str(err)
    else:
        assert said in str(err)


def test_tf_layers_under_keras_3_and_tf_contrib_get_the_legacy_instructions():
    from pgtwin.parity.code_checks import LegacyCodeError

    def with_layers():
        x = tf1.placeholder(tf.float32, [None, 4])
        tf1.layers.dense(x, 2)

    def with_contrib():
        x = tf1.placeholder(tf.float32, [None, 4])
        tf1.contrib.layers.fully_connected(x, 2)

    import os
    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        with pytest.raises(LegacyCodeError) as err:
            compare_programs(TF1Program(build=with_layers, feeds={}, loss="l"),
                             up.tf2_program(), BATCH)
        assert "TF_USE_LEGACY_KERAS=1" in str(err.value) and '".[legacy]"' in str(err.value)
        assert "uses tf.compat.v1.layers.dense," in str(err.value)

        def with_rnn_cell():
            tf1.nn.rnn_cell.LSTMCell(8)

        with pytest.raises(LegacyCodeError) as err:
            compare_programs(TF1Program(build=with_rnn_cell, feeds={}, loss="l"),
                             up.tf2_program(), BATCH)
        assert "uses tf.compat.v1.nn.rnn_cell.LSTMCell," in str(err.value)

        def with_v1_keras_layers():  # Keras 3 under TF >= 2.16: a TF1 optimizer fails on
            x = tf1.placeholder(tf.float32, [None, 4])  # its variables
            layer = tf1.keras.layers.Dense(2)
            loss = tf.reduce_sum(layer(x))
            tf1.train.AdamOptimizer().minimize(loss, var_list=layer.trainable_weights)

        with pytest.raises(LegacyCodeError) as err:
            compare_programs(TF1Program(build=with_v1_keras_layers, feeds={}, loss="l"),
                             up.tf2_program(), BATCH)
        assert "--legacy-keras" in str(err.value) and "TF_USE_LEGACY_KERAS=1" in str(err.value)
        assert "_in_graph_mode" in str(err.value)  # the original error, kept
        assert "a tf.compat.v1 optimizer, Saver or initializer cannot take them" in \
            str(err.value)  # the cause: the layers build, their variables are Keras 3's
    with pytest.raises(LegacyCodeError, match="tf_slim"):
        compare_programs(TF1Program(build=with_contrib, feeds={}, loss="l"),
                         up.tf2_program(), BATCH)


def test_a_missing_feed_is_named_with_the_fix():
    from pgtwin.parity.tf1_side import FeedError
    program = TF1Program(build=up.PolicyGradient, feeds={"obs": "obs_ph", "actions": "act_ph"},
                         loss="loss")
    batch = {k: BATCH[k] for k in ("obs", "actions")}
    with pytest.raises(FeedError, match=r"needs placeholders \['returns'\]"):
        compare_programs(program, up.tf2_program(), batch, steps=0)


def test_refs_can_be_graph_names():
    program = TF1Program(build=up.PolicyGradient,
                         feeds={"obs": "obs", "actions": "actions:0", "returns": "returns"},
                         loss=lambda obj: obj.loss, train_op="train_op")
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()


def test_a_ref_that_names_nothing_lists_the_attributes():
    program = TF1Program(build=up.PolicyGradient, feeds={"obs": "obs_placeholder"}, loss="loss")
    with pytest.raises(LookupError, match=r"feeds\['obs'\]='obs_placeholder'.*obs_ph"):
        compare_programs(program, up.tf2_program(), BATCH)


def test_a_ref_with_a_near_miss_is_offered_the_attribute_it_likely_means():
    program = TF1Program(build=up.PolicyGradient, feeds={"obs": "obs_pH"}, loss="loss")
    with pytest.raises(LookupError, match=r"has no such attribute or key, and its graph no "
                                          r"such tensor or op: did you mean 'obs_ph'\?"):
        compare_programs(program, up.tf2_program(), BATCH)


def test_only_one_side_with_a_train_step_is_a_clear_failure():
    program = TF1Program(build=up.PolicyGradient, loss="loss",
                         feeds={"obs": "obs_ph", "actions": "act_ph", "returns": "ret_ph"})
    bad = compare_programs(program, up.tf2_program(), BATCH, steps=1).first_failure
    assert bad.item == "train step" and "TF1Program.train_op" in bad.note


def test_the_keras_model_owns_the_loaded_values_after_comparison():
    # The harness assigns into the user's own variables: no copies, no stateless_call.
    holder = {}

    def build():
        holder["agent"] = up.KerasAgent()
        return holder["agent"]

    program = TF2Program(build=build, loss=up.tf2_program().loss, model="model")
    compare_programs(up.tf1_program(), program, BATCH, steps=0)
    assert isinstance(holder["agent"].model, keras.Sequential)
    assert len(holder["agent"].model.trainable_variables) == 4


class OwnGraphPolicy(up.PolicyGradient):
    """Old code that makes a graph of its own and starts by resetting the default graph."""

    def __init__(self):
        tf1.reset_default_graph()
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf1.set_random_seed(1)
            super().__init__()


def test_code_with_a_graph_of_its_own_and_reset_default_graph_runs_as_it_is():
    program = dataclasses.replace(up.tf1_program(), build=OwnGraphPolicy)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()


class TwoOptimizers(up.PolicyGradient):
    """The critic's optimizer (another learning rate) in the same, grouped train_op."""

    def __init__(self):
        super().__init__()
        critic_step = tf1.train.AdamOptimizer(0.5).minimize(
            self.value_loss, var_list=tf1.trainable_variables("critic"))
        self.train_op = tf.group(self.train_op, critic_step)


def test_only_the_compared_variables_optimizer_is_read_from_the_train_op():
    program = dataclasses.replace(up.tf1_program(), build=TwoOptimizers)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()
    lr = next(r for r in report.rows if r.item == "optimizer.learning_rate")
    assert lr.max_abs == 0.0  # 0.01 on both sides, not the critic's 0.5


class ModuleAgent(tf.Module):
    """A tf.Module migration with hand-named tf.Variables and its own Keras optimizer."""

    def __init__(self):
        super().__init__(name="pg")
        init = keras.initializers.GlorotUniform()
        self.w1 = tf.Variable(init((up.OBS, up.HIDDEN)), name="W1")
        self.b1 = tf.Variable(tf.zeros([up.HIDDEN]), name="b1")
        self.w2 = tf.Variable(init((up.HIDDEN, up.ACTIONS)), name="W2")
        self.b2 = tf.Variable(tf.zeros([up.ACTIONS]), name="b2")
        self.optimizer = keras.optimizers.Adam(up.LR, epsilon=1e-8)

    def loss(self, b):
        logits = tf.tanh(b["obs"] @ self.w1 + self.b1) @ self.w2 + self.b2
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["actions"], logits=logits)
        return {"loss": tf.reduce_mean(ce * b["returns"]), "logits": logits}


class ModuleDense(tf.Module):
    """A layer as tf.Module examples write it: every instance names its variables w and b."""

    def __init__(self, fan_in, fan_out, activation=None):
        super().__init__()
        self.w = tf.Variable(keras.initializers.GlorotUniform()((fan_in, fan_out)), name="w")
        self.b = tf.Variable(tf.zeros([fan_out]), name="b")
        self.activation = activation

    def __call__(self, x):
        y = x @ self.w + self.b
        return y if self.activation is None else self.activation(y)


class LayeredModuleAgent(tf.Module):
    """A tf.Module migration of layers that reuse the same variable names."""

    def __init__(self):
        super().__init__(name="pg")
        self.hidden = ModuleDense(up.OBS, up.HIDDEN, tf.tanh)
        self.out = ModuleDense(up.HIDDEN, up.ACTIONS)
        self.optimizer = keras.optimizers.Adam(up.LR, epsilon=1e-8)

    def loss(self, b):
        logits = self.out(self.hidden(b["obs"]))
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b["actions"], logits=logits)
        return {"loss": tf.reduce_mean(ce * b["returns"]), "logits": logits}


def test_tf_module_variables_of_one_name_show_as_their_attribute_paths():
    report = compare_programs(up.tf1_program(), TF2Program(build=LayeredModuleAgent,
                                                           loss=lambda a, b: a.loss(b)),
                              BATCH, steps=2)
    assert report.ok, report.to_table()
    # the tf.Variable names are w, b, w, b; the table names where each one sits
    for tf1_name, tf2_name in [("policy/fc1/weights", "hidden/w"), ("policy/fc1/biases", "hidden/b"),
                               ("policy/out/weights", "out/w"), ("policy/out/biases", "out/b")]:
        assert re.search(rf"{tf1_name}\s+\(\d+(, \d+)?,?\)\s+{tf2_name}\s",
                         report.mapping_table), report.mapping_table
    assert "_2/" not in report.mapping_table


def test_a_tf_module_with_hand_named_variables_is_compared_with_its_own_optimizer():
    program = TF2Program(build=ModuleAgent, loss=lambda a, b: a.loss(b))
    report = compare_programs(up.tf1_program(), program, BATCH, steps=2)
    assert report.ok, report.to_table()
    assert re.search(r"policy/fc1/weights\s+\(4, 16\)\s+W1\s", report.mapping_table)


def _loss_adding_a_float64(agent, batch):
    logits = agent.model(tf.constant(batch["obs"], tf.float32))
    return {"loss": tf.reduce_mean(logits) + tf.constant(1.0, tf.float64)}  # TF raises here


def test_a_loss_that_tensorflow_refuses_is_named_at_the_users_line():
    # The innermost frame is TensorFlow's ops.py (raise_from_not_ok_status): the report named
    # that, not the line of the user's code that made the op.
    from pgtwin.parity.code_checks import ProgramBuildError

    program = dataclasses.replace(up.tf2_program(), loss=_loss_adding_a_float64)
    with pytest.raises(ProgramBuildError) as info:
        compare_programs(up.tf1_program(), program, BATCH)
    message = str(info.value)
    line = _loss_adding_a_float64.__code__.co_firstlineno + 2
    assert message.startswith(f"TF2Program.loss raised InvalidArgumentError in {__file__}:"
                              f"{line} in _loss_adding_a_float64 (inside tensorflow."), message


def test_the_initial_draws_leave_tf1s_own_initial_values_in_place():
    # The initialisation rung redraws each initializer 5 times; the ladder then starts from
    # "TF1's initial values" (weights=None), which were the fifth redraw.
    from pgtwin.parity.tf1_side import TF1Side

    side = TF1Side(up.tf1_program(), BATCH)
    before = side.values()
    draws = side.initial_draws(5)
    for name, value in side.values().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
        assert not np.array_equal(draws[name][-1], before[name]) or name.endswith("biases")
    side.close()


def test_a_placeholder_only_the_train_op_reads_is_named_with_the_fix():
    # A learning-rate placeholder left out of the feeds: reading the optimizer's settings
    # raised TensorFlow's InvalidArgumentError (pgtwin compare exited 1, "they part"); it is
    # now named with the loss's placeholders, before anything runs.
    from pgtwin.parity.tf1_side import FeedError

    def fed_rate(lr):
        return tf1.train.AdamOptimizer(tf1.placeholder(tf.float32, [], name="LR"))
    program = dataclasses.replace(up.tf1_program(),
                                  build=lambda: up.PolicyGradient(optimizer=fed_rate))
    with pytest.raises(FeedError, match=r"the TF1 train_op needs placeholders \['LR'\] that "
                                        r"the loss does not .*which TF1Program.feeds does not "
                                        r"name .*: add feeds=\{\.\.\., 'KEY': 'LR'\}"):
        compare_programs(program, up.tf2_program(), BATCH, steps=1)


@pytest.mark.parametrize("var_list", [
    ["policy/fc1/weights", "policy/fc1/biases", "policy/out/weights", "policy/out/biases"],
    lambda agent: tf1.trainable_variables("policy"),  # run in the program's graph
], ids=["graph-names", "function"])
def test_var_list_as_graph_names_or_a_function_names_the_variables(var_list):
    program = dataclasses.replace(up.tf1_program(), var_list=var_list)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()


def test_a_var_list_entry_that_is_no_variable_is_refused_naming_it():
    program = dataclasses.replace(up.tf1_program(), var_list=["policy/fc1/weights", "loss"])
    with pytest.raises(TypeError, match=r"TF1Program.var_list\[1\] is \w+ .*not a variable of "
                                        r"the TF1 graph"):
        compare_programs(program, up.tf2_program(), BATCH, steps=1)


def test_a_loss_function_that_builds_ops_builds_them_in_the_programs_graph():
    # a loss written as a function of the built object, adding an op to its graph
    program = dataclasses.replace(up.tf1_program(), loss=lambda agent: agent.loss * 1.0)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    assert report.ok, report.to_table()


def test_a_variable_the_train_op_steps_but_the_loss_does_not_read_is_a_warning():
    # DDPG's actor is trained through tf.gradients(mu, params, -dQ/da) while the loss given
    # is the critic's: a variable outside the loss that the train_op steps is not checked by
    # any rung, and the report says so. Here the policy's critic, stepped by a second Adam.
    def with_critic_step(agent):
        critic = tf1.train.AdamOptimizer(0.01).minimize(agent.value_loss)
        return [agent.train_op, critic]

    program = dataclasses.replace(up.tf1_program(), train_op=with_critic_step)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=1)
    [row] = [r for r in report.rows if r.item == "TF1 critic/v/weights"]
    assert row.ok and row.note.startswith("WARNING not compared, though TF1's train_op updates "
                                          "it (adam): TF1Program.loss does not depend on it")
    plain = compare_programs(up.tf1_program(), up.tf2_program(), BATCH, steps=0)
    [row] = [r for r in plain.rows if r.item == "TF1 critic/v/weights"]
    assert row.note == "not compared: the TF1 loss does not depend on it"


def test_a_hidden_layer_without_its_activation_is_named_at_the_outputs():
    # TF1: tanh(obs @ w1 + b1); the port's Dense(16) has no activation: one tanh against none
    report = compare_programs(up.tf1_program(), up.tf2_program(hidden_activation=None), BATCH,
                              steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("outputs", "logits"), report.to_table()
    assert bad.note.startswith("the activations differ: TF1's loss is computed through "
                               "tanh x1, the Keras layers apply none")


def test_one_optimizer_applied_once_per_layer_is_named_by_its_iterations():
    # optimizer.build(all), then apply_gradients per layer: Adam's t goes up by 2 a step, so
    # the second layer's bias correction runs ahead of TF1's (t = 2 where TF1's is 1).
    class PerLayer(up.KerasAgent):
        def train_step(self, obs, actions, returns):
            variables = self.model.trainable_variables
            if not self.optimizer.built:
                self.optimizer.build(variables)
            with tf.GradientTape() as tape:
                loss = self.compute_loss(obs, actions, returns)["loss"]
            grads = tape.gradient(loss, variables)
            for layer in self.model.layers:
                mine = [(g, v) for g, v in zip(grads, variables)
                        if any(v is w for w in layer.trainable_variables)]
                self.optimizer.apply_gradients(mine)

    note = _first_weights_note(PerLayer, BATCH)
    assert note.startswith("Adam counted 2 iterations in one train step, where TF1's "
                           "train_op takes one"), note
    assert "apply_gradients once per part of the model" in note


def _first_weights_note(agent_class, batch):
    """The note of the first failure, at the weights rung, of the Keras agent
    ``agent_class`` against the TF1 class over one train step on ``batch``."""
    program = dataclasses.replace(up.tf2_program(), build=agent_class)
    report = compare_programs(up.tf1_program(), program, batch, steps=1)
    assert report.first_failure.rung == "weights", report.to_table()
    return report.first_failure.note


def test_a_fit_step_over_default_batches_leads_with_its_optimizer_steps():
    # model.fit with Keras' default batch_size 32 on a batch of 100 rows takes
    # ceil(100 / 32) = 4 optimizer steps a train step. The first failure (the train step's
    # gradient, read from Adam's m) named another loss or clipped gradients; Adam's m holds
    # four steps' gradients there, and the count is the cause.
    class FitAgent(up.KerasAgent):
        def train_step(self, obs, actions, returns):
            if not getattr(self.model, "compiled", False):
                def loss(y, logits):
                    return tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=tf.cast(tf.reshape(y, [-1]), tf.int32), logits=logits)
                self.model.compile(optimizer=self.optimizer, loss=loss)
                self.model.compiled = True
            self.model.fit(np.asarray(obs), np.asarray(actions), verbose=0, shuffle=False,
                           sample_weight=np.asarray(returns))

    note = _first_weights_note(FitAgent, up.make_batch(n=100))
    assert note.startswith("Adam counted 4 iterations in one train step, where TF1's "
                           "train_op takes one"), note
    assert "(with model.fit: batch_size=len(batch) and epochs=1)" in note


def test_an_sgd_step_twice_as_long_is_named_as_a_scaled_loss_or_rate():
    # Plain SGD moves w by lr * g: a train step minimising 2 x the loss moves every weight
    # 2x as far as TF1's (no Adam moments to read the gradient from).
    tf1_sgd = dataclasses.replace(up.tf1_program(), build=lambda: up.PolicyGradient(
        optimizer=tf1.train.GradientDescentOptimizer))

    def tf2_sgd(**options):
        return dataclasses.replace(up.tf2_program(), build=lambda: up.KerasAgent(
            optimizer=keras.optimizers.SGD(up.LR), **options))

    assert compare_programs(tf1_sgd, tf2_sgd(), BATCH, steps=2).ok
    report = compare_programs(tf1_sgd, tf2_sgd(train_loss_scale=2.0), BATCH, steps=2)
    bad = report.first_failure
    assert bad.rung == "weights" and "step 1/2" in bad.context, report.to_table()
    assert bad.note.startswith("the TF2 train step moved every weight 2x as far as TF1's, all "
                               "of it: a loss scaled in the train step"), bad.note


def test_the_tf1_graph_runs_op_by_op_as_eager_code_does():
    # Grappler's arithmetic rewrites and op fusions reorder float work in a Session (a SAC
    # actor's gradient moved by 4e-3 relative against its eager port). The harness's Session
    # runs the graph as written: this squashed-Gaussian log-likelihood's gradients equal
    # the eager ones bit for bit (with the rewrites on they part in the last bits).
    from pgtwin.parity.tf1_side import TF1Side

    rng = np.random.default_rng(0)
    w1 = (0.4 * rng.normal(size=(6, 32))).astype(np.float32)
    w2 = (0.4 * rng.normal(size=(32, 4))).astype(np.float32)
    batch = {"x": rng.normal(size=(64, 6)).astype(np.float32),
             "noise": rng.normal(size=(64, 2)).astype(np.float32)}

    def loss_of(x, noise, a, b):
        out = tf.nn.relu(x @ a) @ b
        mu, log_std = out[:, :2], -20.0 + 11.0 * (tf.tanh(out[:, 2:]) + 1)
        pi = mu + noise * tf.exp(log_std)
        logp = tf.reduce_sum(-0.5 * (((pi - mu) / (tf.exp(log_std) + 1e-8)) ** 2
                                     + 2 * log_std + np.log(2 * np.pi)), axis=1)
        logp -= tf.reduce_sum(2 * (np.log(2) - pi - tf.nn.softplus(-2 * pi)), axis=1)
        return tf.reduce_mean(0.2 * logp - tf.reduce_sum(tf.tanh(pi), 1))

    class Actor:
        def __init__(self):
            self.x = tf1.placeholder(tf.float32, [None, 6], "x")
            self.noise = tf1.placeholder(tf.float32, [None, 2], "noise")
            self.a = tf1.get_variable("a", initializer=w1)
            self.b = tf1.get_variable("b", initializer=w2)
            self.loss = loss_of(self.x, self.noise, self.a, self.b)

    legacy = TF1Side(TF1Program(build=Actor, feeds={"x": "x", "noise": "noise"}, loss="loss"),
                     batch)
    tf1_grads = legacy.gradients()
    a, b = tf.Variable(w1), tf.Variable(w2)
    with tf.GradientTape() as tape:
        loss = loss_of(tf.constant(batch["x"]), tf.constant(batch["noise"]), a, b)
    eager = tape.gradient(loss, [a, b])
    np.testing.assert_array_equal(tf1_grads["a"], eager[0].numpy())
    np.testing.assert_array_equal(tf1_grads["b"], eager[1].numpy())


def test_weights_parting_after_a_setting_that_differs_name_that_setting_first():
    program = up.tf2_program(optimizer=keras.optimizers.Adam(0.02, epsilon=1e-8))
    report = compare_programs(up.tf1_program(), program, BATCH, steps=1)
    assert report.first_failure.item == "optimizer.learning_rate"
    weights = [r for r in report.rows if "step 1/1" in r.context and not r.ok
               and not r.item.endswith("train step's gradient")]
    assert weights and all(r.note.startswith(
        "the optimizers' settings differ (TF1 learning_rate=0.01, Adam learning_rate=0.02)")
        for r in weights), report.to_table()


def test_a_later_adam_step_parting_with_no_cause_is_told_of_adams_amplification():
    # Only a row whose note says no more than how far the weights part gets the cause; a
    # row with a cause of its own, or a pass, is left as it is.
    from pgtwin.parity.ladder import Row
    from pgtwin.parity.weights_rung import ADAM_NOISE, _adam_noise
    bare = Row("weights", "w -> kernel", 2e-5, 0.05, False,
               "the weights part by 2e-05, 0.09 of the step's largest change (0.00025)", "s")
    assert _adam_noise(bare).note == f"{ADAM_NOISE}; {bare.note}"
    caused = Row("weights", "w -> kernel", 2e-5, 0.05, False, "the TF2 train step made ...")
    assert _adam_noise(caused) is caused
    passed = Row("weights", "w -> kernel", 0.0, 0.0, True)
    assert _adam_noise(passed) is passed


def test_a_small_step_one_side_never_took_fails_though_rtol_would_pass_it():
    """A log_std at 0.5 that TF1 moved by 4e-6 and TF2 left where it was loaded: the weights
    differ by 4e-6, under rtol 1e-5 x 0.5 = 5e-6, yet only one side stepped. Steps of
    float32 rounding size (8 ulp of 0.5 = 4.8e-7) stay judged by the tolerances."""
    from pgtwin.parity.weights_rung import WEIGHT_MOVED, _weight_row
    before = {"log_std": np.float32([0.5])}

    def row(tf1_step):
        after1 = {"log_std": before["log_std"] + np.float32(tf1_step)}
        return _weight_row("log_std", "log_std", before, after1, before, before, 1e-5, 1e-4,
                           "step 1/3", step_scaled=True)
    moved = row(4e-6)
    assert not moved.ok and moved.note.startswith(WEIGHT_MOVED[0]), moved.note
    assert row(1.2e-7).ok  # two ulps of 0.5: a rounding, not a step


def test_a_variable_the_loss_reads_but_var_list_leaves_out_is_told_so():
    """Not "the TF1 loss does not depend on it": the loss reads policy/out/biases, and
    TF1's train_op (minimize over every trainable variable) steps it."""
    program = dataclasses.replace(up.tf1_program(), var_list=[
        "policy/fc1/weights", "policy/fc1/biases", "policy/out/weights"])
    report = compare_programs(program, up.tf2_program(out_bias=False), BATCH, steps=1)
    rows = {r.item: r.note for r in report.rows if r.rung == "variables"}
    assert rows["TF1 policy/out/biases"].startswith(
        "WARNING not compared, though TF1's train_op updates it (adam) and the loss reads it: "
        "TF1Program.var_list leaves it out")
    assert rows["TF1 critic/v/weights"] == "not compared: the TF1 loss does not depend on it"


class EmaPolicy(up.PolicyGradient):
    """Old code that keeps a Polyak average of its policy for evaluation: ema.apply run
    after each minimize (a control dependency), its averages read by an eval head."""

    def __init__(self):
        super().__init__()
        ema = tf1.train.ExponentialMovingAverage(decay=0.995)
        with tf.control_dependencies([self.train_op]):
            self.train_op = ema.apply(tf1.trainable_variables("policy"))
        self.sess.run(tf1.global_variables_initializer())


def test_keras_use_ema_against_tf1s_exponential_moving_average_fails_saying_they_differ():
    """Keras' use_ema copies the weights at its first step; TF1's average starts from the
    initial weights: not one average, though the trained weights agree."""
    program = dataclasses.replace(up.tf1_program(), build=EmaPolicy)
    optimizer = keras.optimizers.Adam(up.LR, epsilon=1e-8, use_ema=True, ema_momentum=0.995)
    report = compare_programs(program, up.tf2_program(optimizer=optimizer), BATCH, steps=1)
    [bad] = failing(report)
    assert bad.item == "optimizer.use_ema"
    assert bad.note.startswith("TF1 keeps an ExponentialMovingAverage's average, and Keras' "
                               "use_ema keeps another one")
    assert compare_programs(program, up.tf2_program(), BATCH, steps=1).ok


def test_an_average_tf1s_train_op_updates_with_no_tf2_partner_warns():
    """The averages read by an eval head are state; the port keeps none: not a silent
    "not compared"."""
    class EvalHead(EmaPolicy):
        def __init__(self):
            super().__init__()
            w = [v for v in tf1.global_variables() if v.name.endswith(
                "out/weights/ExponentialMovingAverage:0")][0]
            self.eval_logits = tf.matmul(tf.zeros([1, up.HIDDEN]), w)

    class KerasEvalHead(up.KerasAgent):
        def compute_loss(self, obs, actions, returns):
            out = super().compute_loss(obs, actions, returns)
            return {**out, "eval_logits": tf.zeros([1, up.HIDDEN]) @ self.model.layers[-1].kernel}

    program = dataclasses.replace(up.tf1_program(), build=EvalHead,
                                  outputs={"eval_logits": "eval_logits"})
    report = compare_programs(program, dataclasses.replace(
        up.tf2_program(), build=KerasEvalHead), BATCH, steps=1)
    assert report.ok, report.to_table()
    assert any(w.item.endswith("ExponentialMovingAverage") and "TF1's train_op updates it"
               in w.note for w in report.warnings), report.to_table()


class BiasPenalty(up.KerasAgent):
    """A port whose loss adds 1e-2 * sum(b^2) over the first layer's bias, which TF1's has
    not: 0, with a zero gradient, at the bias's zero start."""

    def compute_loss(self, obs, actions, returns):
        out = super().compute_loss(obs, actions, returns)
        bias = self.model.layers[0].bias
        return {**out, "loss": out["loss"] + 1e-2 * tf.reduce_sum(tf.square(bias))}


def test_a_loss_term_that_vanishes_at_the_start_is_caught_at_the_weights_after_step_1():
    """At the start the bias is 0: loss, gradients and the first Adam step agree. At TF1's
    weights after step 1 (|b| ~ lr = 1e-2) the term adds 2e-2 b ~ 2e-4 to the bias's
    gradient, far over float64's tolerance; the faithful port passes there."""
    tf2 = dataclasses.replace(up.tf2_program("float64"), build=lambda: BiasPenalty("float64"))
    report = compare_programs(up.tf1_program("float64"), tf2, BATCH, steps=1)
    first = report.first_failure
    assert first is not None and first.item.startswith("policy/fc1/biases -> "), \
        report.to_table()
    assert first.item.endswith(": loss gradient after step 1")
    assert first.note.startswith("the loss's gradients agreed at the starting weights and part "
                                 "at the weights after the first step")
    assert all(r.ok for r in report.rows if r.rung in ("outputs", "loss", "gradients"))
    faithful = compare_programs(up.tf1_program("float64"), up.tf2_program("float64"), BATCH,
                                steps=1)
    assert faithful.ok and any(r.item.endswith("loss gradient after step 1")
                               for r in faithful.rows), faithful.to_table()


def test_a_tf1_loss_that_its_train_op_does_not_minimise_is_named_with_the_one_it_does():
    # TF1Program.loss names a tensor other than the one minimize() differentiates (here 3x
    # it; in user code the policy term where the train_op minimises it with its entropy
    # bonus): the TF2 loss has the minimised tensor's value, so the TF1 side is misdescribed
    program = dataclasses.replace(up.tf1_program(), loss=lambda agent: agent.loss * 3.0)
    report = compare_programs(program, up.tf2_program(), BATCH, steps=0)
    bad = report.first_failure
    assert (bad.rung, bad.item) == ("loss", "loss"), report.to_table()
    assert re.fullmatch(r"TF1Program.loss \(mul\S*:0\) is not what TF1's train_op minimises: "
                        r"it differentiates (?!mul)\S+:0, whose value \S+ is the TF2 loss's: "
                        r"name that tensor as TF1Program.loss", bad.note), bad.note


@pytest.mark.parametrize("outputs,loss_keys,want", [
    # asked for by TF2Program.outputs, returned by no one: before, no row at all (a pass)
    (["logits", "probs"], ("logits",),
     {"probs": "TF2Program.outputs asks for 'probs', and the TF2 loss returns no such key "
               "(its keys: logits): return it from the loss, or take it out of "
               "TF2Program.outputs"}),
    # returned, but left out by TF2Program.outputs: before, "only TF1Program returns it"
    (["probs"], ("logits",),
     {"logits": "the TF2 loss returns 'logits', but TF2Program.outputs (probs) leaves it out: "
                "list it there, or leave outputs None (every key TF1Program.outputs has)",
      "probs": "TF2Program.outputs asks for 'probs', and the TF2 loss returns no such key "
               "(its keys: logits): return it from the loss, or take it out of "
               "TF2Program.outputs"}),
    # not returned at all
    (None, (), {"logits": "TF1Program.outputs has 'logits', and the TF2 loss returns no such "
                          "key (its keys: none but loss): return it from the loss under that "
                          "name"}),
])
def test_an_output_key_one_side_lacks_says_which_description_lacks_it(outputs, loss_keys, want):
    def loss(agent, b):
        out = agent.compute_loss(b["obs"], b["actions"], b["returns"])
        return {k: v for k, v in out.items() if k == "loss" or k in loss_keys}

    program = dataclasses.replace(up.tf2_program(), loss=loss, outputs=outputs)
    report = compare_programs(up.tf1_program(), program, BATCH, steps=0)
    got = {r.item: r.note for r in report.rows if r.rung == "outputs" and not r.ok}
    assert got == want, report.to_table()


def test_gradients_that_part_under_an_equal_loss_are_told_as_a_detached_term():
    # 0.5 L + 0.5 stop_gradient(L): the loss's value is TF1's, its gradient half of it
    def half_detached(agent, b):
        out = agent.compute_loss(b["obs"], b["actions"], b["returns"])
        return {**out, "loss": 0.5 * out["loss"] + 0.5 * tf.stop_gradient(out["loss"])}

    program = dataclasses.replace(up.tf2_program(), loss=half_detached)
    report = compare_programs(up.tf1_program(), program, BATCH, steps=0)
    bad = [r for r in report.rows if not r.ok]
    assert bad and all(r.rung == "gradients" for r in bad), report.to_table()
    assert all(r.note.startswith("the outputs and the loss agree and their gradients part: "
                                 "the two losses have the same value and another derivative")
               for r in bad), bad[0].note


def test_a_feed_naming_a_method_says_so_and_lists_the_objects_tensors():
    program = dataclasses.replace(up.tf1_program(), feeds={**up.tf1_program().feeds,
                                                           "obs": "__init__"})
    with pytest.raises(TypeError) as err:
        compare_programs(program, up.tf2_program(), BATCH, steps=0)
    msg = str(err.value)
    assert msg.startswith("TF1Program.feeds['obs'] is a method (PolicyGradient.__init__), "
                          "not a tensor of the TF1 graph: name a tensor"), msg
    assert "the built object's tensors: [" in msg and "'obs_ph'" in msg, msg


def test_inputs_and_feeds_that_differ_say_how_to_make_them_agree():
    # 'returns' misnamed 'ret' in the inputs: a feed without its input
    batch = {"obs": BATCH["obs"], "actions": BATCH["actions"], "ret": BATCH["returns"]}
    with pytest.raises(ValueError) as err:
        compare_programs(up.tf1_program(), up.tf2_program(), batch, steps=0)
    msg = str(err.value)
    assert msg.startswith("TF1Program: the inputs and the feeds differ: feeds without an input "
                          "['returns'], inputs without a feed ['ret'] (feeds: "), msg
    assert msg.endswith(
        "give every feed key an input array of that name, and name in TF1Program.feeds the "
        "placeholder each input goes to (an input no feed names goes to the TF2 side only)")
    with pytest.raises(ValueError) as err:  # only the side with keys left over is listed
        compare_programs(up.tf1_program(), up.tf2_program(), {"obs": BATCH["obs"]}, steps=0)
    assert "feeds without an input ['actions', 'returns'] (feeds:" in str(err.value)


def test_an_input_no_feed_names_goes_to_the_tf2_side_and_is_listed():
    # TF1's loop fed returns it discounted in numpy; the port discounts raw rewards itself,
    # so the batch holds both and only the TF2 side reads 'rewards'
    base = up.tf2_program()

    def loss(agent, batch):
        assert "rewards" in batch  # given to the TF2 side
        return base.loss(agent, batch)
    program = dataclasses.replace(base, loss=loss)
    report = compare_programs(up.tf1_program(), program,
                              {**BATCH, "rewards": np.ones(len(BATCH["obs"]))}, steps=1)
    assert report.ok, report.to_table()
    [row] = [r for r in report.rows if r.item == "input 'rewards'"]
    assert row.note.startswith("given to the TF2 side only")


def test_a_dtype_the_tf1_code_does_not_build_in_names_its_class_and_the_fix():
    # the factory below ignores dtype: PolicyGradient builds in float32
    with pytest.raises(ValueError) as err:
        compare_programs(up.tf1_program("float32"), up.tf2_program("float64"), BATCH,
                         dtype="float64")
    assert str(err.value).startswith(
        "the TF1 code built float32 variables, but float64 was asked for: pass the dtype on to "
        "it.")
    assert "build PolicyGradient in that dtype there" in str(err.value)


def test_a_class_without_a_dtype_argument_is_told_to_compare_in_its_dtype():
    class Fixed(up.PolicyGradient):  # the tutorials' classes: float32 written in the code
        def __init__(self):
            super().__init__()
    program = dataclasses.replace(up.tf1_program(), build=Fixed)
    with pytest.raises(ValueError) as err:
        compare_programs(program, up.tf2_program("float64"), BATCH, dtype="float64")
    assert str(err.value).startswith(
        "the TF1 code built float32 variables, but float64 was asked for: Fixed takes no dtype "
        "argument, so its placeholders and variables are float32 as written")


def test_tf_keras_legacy_layers_start_from_the_same_weights_in_every_build():
    # tf.compat.v1.layers.dense under TF_USE_LEGACY_KERAS=1 is tf_keras' legacy dense, whose
    # default initializer takes its seed from Python's random module, not the graph seed:
    # two builds drew different kernels. The harness seeds random while the code builds and
    # gives the caller's random state back.
    import random
    from tf_keras.src.legacy_tf_layers.core import dense
    from pgtwin.parity.tf1_side import TF1Side

    def build():
        obs = tf1.placeholder(tf.float32, [None, 4], name="obs")
        return {"obs": obs, "loss": tf.reduce_sum(dense(obs, 3))}
    program = TF1Program(build=build, feeds={"obs": "obs"}, loss="loss")
    random.seed(123)
    before = random.getstate()
    kernels = []
    for _ in range(2):
        random.random()  # the caller's own draws in between
        side = TF1Side(program, {"obs": np.ones((2, 4))})
        try:
            kernels.append(np.concatenate([v.ravel() for v in side.values().values()]))
        finally:
            side.close()
    np.testing.assert_array_equal(kernels[0], kernels[1])
    random.setstate(before)
    expected = [random.random() for _ in range(2)]
    random.setstate(before)
    random.random()
    TF1Side(program, {"obs": np.ones((2, 4))}).close()
    assert random.random() == expected[1]  # the build drew nothing from the caller's stream


def test_a_long_error_from_the_users_code_is_cut_and_says_how_much_was_left_out():
    # Keras put a whole kernel (80 lines) in the message of a uint8 input to Conv2D
    from pgtwin.parity.code_checks import MAX_ERROR_LINES, ProgramBuildError

    def build():
        raise ValueError("bad input\n" + "\n".join(f"[{i} 0.1 0.2 0.3]" for i in range(80)))
    with pytest.raises(ProgramBuildError) as err:
        compare_programs(up.tf1_program(), TF2Program(build=build, loss=lambda o, b: 0.0),
                         BATCH)
    text = str(err.value)
    assert text.startswith("TF2Program.build raised ValueError in ")
    # 'bad input' and the first 11 rows are kept; rows 11..79 are left out
    assert "[10 0.1 0.2 0.3]" in text and "[11 0.1" not in text
    assert len(text.splitlines()) == MAX_ERROR_LINES
    assert text.endswith("more characters of the message)")


def test_a_second_copy_of_the_network_the_loss_does_not_read_is_named_each_variable_by_path():
    # TF1 acts with the trained variables (reuse); the port built a new model for acting:
    # its variables were listed as two rows (tf.Variable names 'kernel', 'bias' merged)
    # and the run passed with no word
    class WithActingCopy(up.KerasAgent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.acting = keras.Sequential([keras.Input((up.OBS,)),
                                            keras.layers.Dense(up.HIDDEN, activation="tanh"),
                                            keras.layers.Dense(up.ACTIONS)])

    program = dataclasses.replace(up.tf2_program(), build=WithActingCopy, model=None)
    report = compare_programs(up.tf1_program(), program, BATCH, steps=0)
    rows = [r for r in report.rows if r.item.startswith("TF2 ") and "not compared" in r.note]
    assert len(rows) == 4, report.to_table()  # two kernels, two biases, each by its path
    assert len({r.item for r in rows}) == 4
    assert all(r.note.startswith("WARNING not compared: the TF2 loss does not read it; every "
                                 "such variable has a compared one's shape") for r in rows)


def test_a_rate_the_train_step_sets_is_not_blamed_by_the_weights_rows():
    # The port's Adam is built with 3e-4 and its train step assigns TF1's rate (annealed-
    # rate code); its epsilon is Keras' default 1e-7 against TF1's 1e-8. The settings row
    # for the rate passes once read after the first step, and the weights rows now name
    # only the epsilon (before, they led with "learning_rate=0.01, Adam learning_rate=3e-4")
    report = compare_programs(up.tf1_program(), up.tf2_program(
        optimizer=keras.optimizers.Adam(3e-4), train_sets_rate=up.LR), BATCH)
    [rate] = [r for r in report.rows if r.item == "optimizer.learning_rate"]
    assert rate.ok, report.to_table()
    weight_rows = [r for r in report.rows if r.rung == "weights" and " -> " in r.item
                   and not r.ok]
    assert weight_rows, report.to_table()
    for r in weight_rows:
        assert "epsilon" in r.note and "learning_rate" not in r.note, r.note


def test_no_train_step_on_either_side_compares_the_rest_and_warns():
    # TRPO's update is Python: compared without a train op, the CLI's default --steps 3
    # failed the report with "neither side has a train step" though every rung passed
    program = dataclasses.replace(up.tf1_program(), train_op=None)
    base = up.tf2_program()
    tf2 = TF2Program(build=lambda: base.build().model, loss=lambda m, b: up.KerasAgent.
                     compute_loss(_NoOptimizer(m), b["obs"], b["actions"], b["returns"]))
    report = compare_programs(program, tf2, BATCH, steps=3)
    assert report.ok, report.to_table()
    [row] = [r for r in report.rows if r.item == "train step"]
    assert row.note.startswith("WARNING no train steps compared: neither side has one")


class _NoOptimizer:
    """A KerasAgent's loss on ``model`` alone: no optimizer held, so no TF2 step."""

    def __init__(self, model):
        agent = up.KerasAgent("float32")
        self.model, self.ce, self.reduce = model, agent.ce, agent.reduce


def test_a_feed_naming_two_towers_placeholders_is_told_to_split_the_batch():
    class Towers:
        def __init__(self):
            tf1.set_random_seed(0)
            w = tf1.get_variable("pi/w", [4, 3])
            self.obs_phs = [tf1.placeholder(tf.float32, [None, 4], name=f"tower_{i}/obs")
                            for i in range(2)]
            self.loss = tf.add_n([tf.reduce_sum(o @ w) for o in self.obs_phs])
    with pytest.raises(TypeError, match=r"TF1Program.feeds\['obs'\] is a list, not a tensor "
                                        r".* A feed names one placeholder: where towers each "
                                        r"take a part of the batch .* \(obs_0, obs_1\)"):
        compare_programs(TF1Program(build=Towers, loss="loss",
                                    feeds={"obs": ["tower_0/obs:0", "tower_1/obs:0"]}),
                         up.tf2_program(), {"obs": BATCH["obs"]}, steps=0)
