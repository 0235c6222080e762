"""examples/tf1_*: each TF1 program builds and trains a step; each TF2 migration steps eagerly.

No harness here (tests of ``pgtwin compare`` on these factories live with the harness):
only that every program the factories describe runs as written. The TF1 objects are built
inside ``with tf.Graph().as_default():`` in this eager process and fed the committed
batches as old code fed them (float64 / int64 into float32 / int32 placeholders, cast by
``feed_dict``); the notebook with TF1's ref variables, as ``TF1Program`` builds it by default
(its ``get_global_step()`` needs an integer ``global_step:0``).
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from examples.make_batches import EXAMPLES, batch_path
from pgtwin.parity.programs import TF1Program, TF2Program, resolve

tf1 = tf.compat.v1
EXAMPLES_DIR = pathlib.Path(__file__).resolve().parent.parent / "examples"
EAGER_SWITCHES = {"disable_eager_execution", "disable_v2_behavior"}


def programs(example: str):
    return importlib.import_module(f"examples.{example}.programs")


def committed_batch(example: str) -> dict[str, np.ndarray]:
    with np.load(batch_path(example)) as data:
        return {k: data[k] for k in data.files}


@contextlib.contextmanager
def tf1_variables(resource: bool):
    """TF1's ref variables (``resource=False``) or TF2's resource variables, then as it was."""
    was = tf1.resource_variables_enabled()
    (tf1.enable_resource_variables if resource else tf1.disable_resource_variables)()
    try:
        yield
    finally:
        (tf1.enable_resource_variables if was else tf1.disable_resource_variables)()


def tf1_cases():
    for example in EXAMPLES:
        for dtype in programs(example).DTYPES:
            kinds = (False,) if example == "tf1_notebook" else (False, True)
            for resource in kinds:
                yield pytest.param(example, dtype, resource,
                                   id=f"{example}-{dtype}-{'resource' if resource else 'ref'}")


@pytest.mark.parametrize("example,dtype,resource", list(tf1_cases()))
def test_tf1_program_builds_in_a_graph_of_its_own_and_its_train_op_steps(example, dtype,
                                                                         resource):
    program = programs(example).tf1(dtype)
    assert isinstance(program, TF1Program)
    batch = committed_batch(example)
    graph = tf.Graph()
    with graph.as_default(), tf1_variables(resource):
        obj = program.build()
        loss = resolve(obj, program.loss, "loss", graph)
        train_op = resolve(obj, program.train_op, "train_op", graph)
        feeds = {resolve(obj, ref, key, graph): batch[key] for key, ref in program.feeds.items()}
        assert loss.dtype == tf.as_dtype(dtype)
        variables = [v for v, g in zip(tf1.trainable_variables(),
                                       tf.gradients(loss, tf1.trainable_variables()))
                     if g is not None]
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            before = sess.run(variables)
            first, _ = sess.run([loss, train_op], feeds)
            after = sess.run(variables)
    assert np.isfinite(first)
    assert variables and all(not np.array_equal(a, b) for a, b in zip(before, after))
    assert tf.executing_eagerly()  # the example did not switch eager off for the process


def test_the_notebook_refuses_float64_with_the_reason():
    with pytest.raises(ValueError, match="float32"):
        programs("tf1_notebook").tf1("float64")


def test_the_actor_critics_critic_is_in_the_graph_but_not_in_the_actors_loss():
    program = programs("tf1_actor_critic").tf1()
    graph = tf.Graph()
    with graph.as_default(), tf1_variables(False):
        obj = program.build()
        loss = resolve(obj, program.loss, "loss", graph)
        trainable = tf1.trainable_variables()
        grads = dict(zip([v.op.name for v in trainable], tf.gradients(loss, trainable)))
    assert {n for n, g in grads.items() if g is None} == {
        f"critic/{layer}/{p}" for layer in ("h1", "h2", "v") for p in ("w", "b")}


def tf2_factories(which: str):
    for example in EXAMPLES:
        module = programs(example)
        names = module.FAITHFUL if which == "faithful" else tuple(module.WRONG_MIGRATIONS)
        for name in names:  # the wrong ones in float32 only: they fail the same either way
            for dtype in ("float32", "float64")[:2 if which == "faithful" else 1]:
                yield pytest.param(example, name, dtype, id=f"{example}:{name}-{dtype}")


def tf2_inputs(example: str) -> dict[str, tf.Tensor]:
    """The committed batch as tensors, float64 / int64 as stored (the loss casts them)."""
    return {k: tf.constant(v) for k, v in committed_batch(example).items()}


def model_of(program: TF2Program, obj):
    return obj if program.model is None else resolve(obj, program.model, "model")


def loss_value(out) -> tf.Tensor:
    return out["loss"] if isinstance(out, dict) else out


@pytest.mark.parametrize("example,name,dtype", list(tf2_factories("faithful")))
def test_a_faithful_migration_steps_eagerly_on_its_own_variables(example, name, dtype):
    program = getattr(programs(example), name)(dtype)
    assert isinstance(program, TF2Program)
    obj = program.build()
    model = model_of(program, obj)
    inputs = tf2_inputs(example)
    before = [v.numpy() for v in model.trainable_variables]
    assert len(before) == 6 and all(v.dtype == dtype for v in before)
    loss = loss_value(program.loss(obj, inputs))
    assert loss.dtype == dtype and np.isfinite(loss.numpy())
    step = program.train_step(obj, inputs)
    assert np.isfinite(float(loss_value(step)))
    after = [v.numpy() for v in model.trainable_variables]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))


@pytest.mark.parametrize("example,name,dtype", list(tf2_factories("wrong")))
def test_a_wrong_migration_builds_and_gives_a_finite_loss(example, name, dtype):
    program = getattr(programs(example), name)(dtype)
    obj = program.build()
    assert np.isfinite(float(loss_value(program.loss(obj, tf2_inputs(example)))))


def test_numpy_log_probs_leave_the_loss_without_a_gradient_path():
    program = programs("tf1_agent_class").tf2_numpy_log_probs()
    agent = program.build()
    variables = agent.policy.trainable_variables
    with tf.GradientTape() as tape:
        loss = program.loss(agent, tf2_inputs("tf1_agent_class"))["loss"]
    assert all(g is None for g in tape.gradient(loss, variables))


def test_every_example_has_three_wrong_migrations_each_documented_with_its_rung():
    for example in EXAMPLES:
        module = programs(example)
        assert len(module.WRONG_MIGRATIONS) >= 3, example
        for name, rung in module.WRONG_MIGRATIONS.items():
            assert f"**{rung}**" in getattr(module, name).__doc__, (example, name)


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_committed_batch_is_what_make_batch_writes(example):
    committed = committed_batch(example)
    made = programs(example).make_batch(0)
    assert committed.keys() == made.keys()
    for key, value in made.items():
        assert committed[key].dtype == value.dtype and np.array_equal(committed[key], value), key
    assert committed["obs"].dtype == np.float64 and committed["actions"].dtype == np.int64


def test_no_example_switches_eager_execution_off():
    """A call to either switch would break the harness's process (docstrings may name them)."""
    calls = []
    for path in sorted(EXAMPLES_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in EAGER_SWITCHES:
                    calls.append(f"{path.relative_to(EXAMPLES_DIR)}:{node.lineno} {name}")
    assert not calls, calls
