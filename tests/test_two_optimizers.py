"""compare on an actor-critic that trains each network with its own optimizer.

The TF1 side (tests/actor_critic_programs.py) runs two AdamOptimizers, lr 3e-4 for the
actor and 1e-3 for the critic, joined by tf.group; the TF2 side holds two Keras Adams.
Read as one optimizer, TF1's was "mixed" and every migration of such code failed.
"""
from __future__ import annotations

import dataclasses

import keras
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.optimizer_config import tf1_clipping, tf1_settings_by_variable
from pgtwin.parity.optimizer_groups import form_groups, group_label, keras_owns
from tests import actor_critic_programs as ac

BATCH = ac.make_batch()
ACTOR = ["actor/fc1/w", "actor/fc1/b", "actor/out/w", "actor/out/b"]
CRITIC = [n.replace("actor", "critic") for n in ACTOR]


def failing(report):
    return [r for r in report.rows if not r.ok]


@pytest.mark.parametrize("dtype, compiled", [("float32", False), ("float64", False),
                                             ("float32", True)])
def test_a_faithful_actor_critic_with_two_optimizers_passes(dtype, compiled):
    # compiled: each network holds its optimizer (model.compile), the agent neither
    report = compare_programs(ac.tf1_program(dtype), ac.tf2_program(dtype, compiled=compiled),
                              BATCH, steps=3)
    assert report.ok, report.to_table()
    rates = {r.item: r for r in report.rows if r.item.endswith("optimizer.learning_rate")}
    assert set(rates) == {"actor/*: optimizer.learning_rate", "critic/*: optimizer.learning_rate"}
    taken = [r for r in report.rows if r.item.endswith("train step's gradient")]
    assert [r.item.split(" ->")[0] for r in taken] == ACTOR + CRITIC


def test_a_critic_loss_scaled_in_the_train_step_fails_at_the_critics_gradients_only():
    # Hand derivation: TF2's critic step takes 10 g where TF1's takes g, so each critic row's
    # max_rel is |10g - g| / |10g| = 0.9; the actor's loss and optimizer are untouched.
    report = compare_programs(ac.tf1_program(), ac.tf2_program(critic_scale=10.0), BATCH,
                              steps=3)
    bad = failing(report)
    assert [r.item.split(" ->")[0] for r in bad] == CRITIC, report.to_table()
    assert all(r.item.endswith("train step's gradient") and abs(r.max_rel - 0.9) < 1e-5
               for r in bad)
    assert bad[0].note.startswith("the TF2 train step's gradient is 10x TF1's, all of it")


def test_the_critics_own_adam_setting_is_compared_with_the_critics_tf1_optimizer():
    report = compare_programs(ac.tf1_program(), ac.tf2_program(critic_beta_2=0.99), BATCH,
                              steps=1)
    assert [r.item for r in failing(report)] == ["critic/*: optimizer.beta_2"]
    assert failing(report)[0].note == "TF1 beta_2=0.999, Adam beta_2=0.99: write beta_2=0.999"


@pytest.mark.parametrize("compiled", [False, True])
def test_two_swapped_optimizers_are_named_as_the_cause(compiled):
    report = compare_programs(ac.tf1_program(), ac.tf2_program(swap=True, compiled=compiled),
                              BATCH, steps=1)
    first = report.first_failure
    assert first.item == "actor/*: optimizer.learning_rate", report.to_table()
    assert first.note == ("the TF2 train step swaps two optimizers: the Keras optimizer that "
                          "steps actor/* has the settings TF1 gives critic/* (TF1 "
                          "learning_rate=0.0003, Adam learning_rate=0.001)")


def test_one_keras_optimizer_for_both_networks_fails_at_the_group_whose_rate_it_lacks():
    # A port that steps both networks with one Adam at the actor's rate: only the critic's
    # group parts (TF1 steps it at 1e-3).
    def one_optimizer():
        agent = ac.KerasActorCritic()
        agent.critic_opt = agent.actor_opt = keras.optimizers.Adam(ac.ACTOR_LR, epsilon=1e-8)
        agent.actor_opt.build(agent.actor.trainable_variables  # one optimizer over both
                              + agent.critic.trainable_variables)
        return agent

    program = dataclasses.replace(ac.tf2_program(), build=one_optimizer)
    report = compare_programs(ac.tf1_program(), program, BATCH, steps=1)
    assert report.first_failure.item == "critic/*: optimizer.learning_rate", report.to_table()
    assert report.first_failure.note == (
        "the TF2 side steps critic/* and actor/* with one Keras optimizer, TF1 with two: give "
        "critic/* a Keras optimizer of its own (TF1 learning_rate=0.001, Adam "
        "learning_rate=0.0003)")


def test_tf1_settings_are_read_per_variable_and_clipping_per_optimizer():
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)  # op determinism may be on in this process
        agent = ac.TF1ActorCritic()
        variables = {v.name.split(":")[0]: v for v in tf.compat.v1.trainable_variables()}
        by_name = tf1_settings_by_variable(agent.train_op, agent.sess, None, variables)
        assert {n: s["learning_rate"] for n, (_, s) in by_name.items()} == pytest.approx(
            {**dict.fromkeys(ACTOR, ac.ACTOR_LR), **dict.fromkeys(CRITIC, ac.CRITIC_LR)})
        assert {k for k, _ in by_name.values()} == {"adam"}
        # a critic whose gradients are clipped, an actor whose are not
        critic = [variables[n] for n in CRITIC]
        grads = tf.gradients(agent.critic_loss, critic)
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        step = tf.group(tf.compat.v1.train.AdamOptimizer(1.0).minimize(
            agent.actor_loss, var_list=[variables[n] for n in ACTOR]),
            tf.compat.v1.train.AdamOptimizer(1.0).apply_gradients(zip(clipped, critic)))
        assert tf1_clipping(step, agent.loss, critic) is not None
        assert tf1_clipping(step, agent.loss, [variables[n] for n in ACTOR]) is None
        agent.sess.close()


def test_groups_and_their_labels():
    actor, critic = object(), object()
    adam = ("adam", {"learning_rate": 1e-3})
    groups = form_groups([("a/x", "x"), ("c/y", "y"), ("a/z", "z")],
                         {"a/x": adam, "c/y": adam, "a/z": adam},
                         {id(actor): ("adam", {}), id(critic): ("adam", {})},
                         {"x": actor, "y": critic, "z": actor})
    assert [(g.tf1_names, g.keras is actor, g.label) for g in groups] == [
        (["a/x", "a/z"], True, "a/*"), (["c/y"], False, "c/y")]
    only = form_groups([("a/x", "x")], {"a/x": adam}, {id(actor): ("adam", {})}, {"x": actor})
    assert only[0].label == ""  # one group: the rows keep their plain items
    assert group_label(["pi/w", "vf/w", "vf/b"]) == "pi/w and 2 more"


def test_a_keras_optimizer_knows_its_variables_once_built():
    a, b = tf.Variable([1.0]), tf.Variable([2.0])
    opt = keras.optimizers.Adam()
    assert keras_owns(opt, a) is None  # not built: it cannot tell
    opt.apply_gradients([(tf.constant([0.1]), a)])
    assert keras_owns(opt, a) is True and keras_owns(opt, b) is False


@pytest.mark.parametrize("train_op", [
    ["actor_train", "critic_train"],  # as sess.run([actor_train, critic_train]) runs them
    ("actor_train", "critic_train"),
    lambda agent: [agent.actor_train, agent.critic_train],
    lambda agent: tf.group(agent.actor_train, agent.critic_train),  # built in its graph
], ids=["list", "tuple", "function-list", "function-group"])
def test_a_train_op_given_as_several_ops_runs_them_all(train_op):
    program = dataclasses.replace(ac.tf1_program(), train_op=train_op)
    report = compare_programs(program, ac.tf2_program(), BATCH, steps=2)
    assert report.ok, report.to_table()
    assert any(r.item == "critic/*: optimizer.learning_rate" for r in report.rows)


@pytest.mark.parametrize("train_op, found", [
    (lambda agent: 0.5, "float (0.5)"),
    ([], "an empty list"),
    (["actor_train", "actor_loss.dtype"], "DType"),
])
def test_a_train_op_that_is_no_op_is_refused_with_what_it_is(train_op, found):
    program = dataclasses.replace(ac.tf1_program(), train_op=train_op)
    with pytest.raises(Exception) as err:
        compare_programs(program, ac.tf2_program(), BATCH, steps=1)
    assert "TF1Program.train_op" in str(err.value) and found in str(err.value)
    assert "name the op your code runs to train" in str(err.value)


def test_one_unbuilt_keras_optimizer_applied_to_two_models_is_told_how_to_build_it():
    # Keras 3 builds an optimizer on its first apply_gradients' variables (the actor's) and
    # refuses the critic's in the second call with "Unknown variable: <Variable ...
    # value=[[...]]>", a whole weight matrix in the message.
    def shared():
        agent = ac.KerasActorCritic()
        agent.critic_opt = agent.actor_opt
        return agent

    report = compare_programs(ac.tf1_program(), dataclasses.replace(ac.tf2_program(),
                                                                    build=shared), BATCH,
                              steps=1)
    step = next(r for r in report.rows if r.item == "train step")
    assert step.note.startswith("the TF2 train step raised ValueError in "), step.note
    assert ": a Keras optimizer is built on the variables of its first apply_gradients" in \
        step.note
    assert "value=" not in step.note and "(Unknown variable: <Variable path=" in step.note


def test_an_optimizer_built_on_no_variables_is_told_so_not_to_build_it_first():
    # A subclassed model built with model.build(shape) whose layers make their weights on
    # the first call holds none yet: optimizer.build(model.trainable_variables) builds on
    # an empty list, and apply_gradients then refuses every variable ("Unknown variable").
    # The note had said to build the optimizer first, which this port had done.
    def empty_first(obj, batch):
        if not obj.actor_opt.built:
            obj.actor_opt.build([])
        with tf.GradientTape() as tape:
            loss = ac.tf2_program().loss(obj, batch)["loss"]
        variables = obj.actor.trainable_variables
        obj.actor_opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

    program = dataclasses.replace(ac.tf2_program(), train_step=empty_first)
    report = compare_programs(ac.tf1_program(), program, BATCH, steps=1)
    step = next(r for r in report.rows if r.item == "train step")
    assert ": the Keras optimizer was built on no variables: optimizer.build ran on an empty " \
           "list" in step.note, step.note
