"""Both twins refuse, with one message, a checkpoint written by another architecture,
dtype or optimizer (issue 17, item 1: the graph twin's ``Saver`` used to accept them).

Expected phrases are written out by hand from the shapes: CartPole's policy with
``hidden=(64, 64)`` has kernels (4, 64), (64, 64), (64, 2); with ``hidden=(32,)`` it has
(4, 32) and a head of (32, 2), and no ``dense_1``.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import IncompatibleCheckpointError
from pgtwin_core.specs import PolicySpec
from pgtwin.twins import IMPLS, agent_class


def _spec(hidden):
    return PolicySpec("categorical", (4,), 2, hidden=hidden)


def _saved(tmp_path, impl, hidden=(64, 64), **config):
    agent = agent_class(impl)(_spec(hidden), ReinforceConfig(**config), seed=1)
    try:
        return agent.save(os.path.join(str(tmp_path), impl, "ckpt"))
    finally:
        agent.close()


def _refusal(impl, path, hidden, **config) -> IncompatibleCheckpointError:
    agent = agent_class(impl)(_spec(hidden), ReinforceConfig(**config), seed=2)
    before = agent.get_weights()
    try:
        with pytest.raises(IncompatibleCheckpointError) as info:
            agent.restore(path)
        after = agent.get_weights()
        info_ = agent.variable_info()
    finally:
        agent.close()
    for name in before:  # nothing was assigned
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    assert {n: s for n, (s, _) in info_.items()} == {n: tuple(w.shape) for n, w in after.items()}
    return info.value


ARCH_PROBLEMS = [
    "policy/dense_0/kernel: checkpoint (4, 64) float32, agent (4, 32) float32",
    "policy/dense_0/bias: checkpoint (64,) float32, agent (32,) float32",
    "policy/head/kernel: checkpoint (64, 2) float32, agent (32, 2) float32",
    "policy/dense_1/kernel: in the checkpoint (64, 64) float32, not in the agent",
    "policy/dense_1/bias: in the checkpoint (64,) float32, not in the agent",
]


@pytest.mark.parametrize("impl", IMPLS)
def test_another_architecture_is_refused_naming_every_variable_and_both_shapes(tmp_path, impl):
    path = _saved(tmp_path, impl)
    err = _refusal(impl, path, (32,))
    assert sorted(err.problems) == sorted(ARCH_PROBLEMS)
    assert str(err).startswith(f"checkpoint {path} does not fit this agent: ")
    assert "built with the PolicySpec and ReinforceConfig" in str(err)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("saved, wanted", [("adam", "sgd"), ("sgd", "adam")])
def test_another_optimizer_is_refused(tmp_path, impl, saved, wanted):
    path = _saved(tmp_path, impl, optimizer=saved)
    err = _refusal(impl, path, (64, 64), optimizer=wanted)
    assert err.problems == [f"optimizer: checkpoint {saved}, agent {wanted}"]


@pytest.mark.parametrize("impl", IMPLS)
def test_another_dtype_is_refused(tmp_path, impl):
    path = _saved(tmp_path, impl, dtype="float64")
    err = _refusal(impl, path, (64, 64))
    assert "policy/head/bias: checkpoint (2,) float64, agent (2,) float32" in err.problems
    assert len(err.problems) == 6  # every weight of the (64, 64) policy


def test_both_twins_give_the_same_refusal(tmp_path):
    problems = [_refusal(impl, _saved(tmp_path, impl, optimizer="sgd"), (32,)).problems
                for impl in IMPLS]
    assert problems[0] == problems[1]
    assert problems[0][-1] == "optimizer: checkpoint sgd, agent adam"


@pytest.mark.parametrize("impl", IMPLS)
def test_the_same_architecture_still_restores(tmp_path, impl):
    path = _saved(tmp_path, impl)
    source = agent_class(impl)(_spec((64, 64)), ReinforceConfig(), seed=1)
    target = agent_class(impl)(_spec((64, 64)), ReinforceConfig(), seed=2)
    target.restore(path)
    want, got = source.get_weights(), target.get_weights()
    for name in want:
        np.testing.assert_array_equal(want[name], got[name], err_msg=name)
    source.close()
    target.close()


@pytest.mark.parametrize("written, reading, named, fix", [
    ("eager", "graph", "is a TF2 tf.train.Checkpoint (the eager twin's",
     "restore it with eager.agent.ReinforceAgent"),
    ("graph", "eager", "is a TF1 Saver checkpoint (the graph twin's",
     "convert it with pgtwin convert-checkpoint SRC DST"),
])
def test_the_other_twins_checkpoint_is_named_as_such(tmp_path, written, reading, named, fix):
    # the same spec and config: only the file format differs (before, the graph twin read
    # an eager checkpoint as "written with sgd", and the eager twin raised NotFoundError)
    path = _saved(tmp_path, written)
    err = _refusal(reading, path, (64, 64))
    assert str(err).startswith(f"checkpoint {path} {named}"), str(err)
    assert fix in str(err) and str(err).endswith("nothing was restored")


@pytest.mark.parametrize("impl", IMPLS)
def test_a_missing_checkpoint_is_named(tmp_path, impl):
    agent = agent_class(impl)(_spec((64, 64)), ReinforceConfig(), seed=2)
    missing = os.path.join(str(tmp_path), "nowhere", "ckpt")
    try:
        with pytest.raises(FileNotFoundError, match=f"no checkpoint at '{missing}'"):
            agent.restore(missing)
    finally:
        agent.close()


# hidden=(8,): P = 4*8 + 8 + 8*2 + 2 = 58 weights; optimal_per_param's memory holds num and
# den of [P], sum_r and count scalars; optimal_time's num and den [rows, P], sum_r [rows, 1].
MEMORY_REFUSALS = {
    "none": "baseline_memory: in the checkpoint (count (), den (58,), num (58,), sum_r ()), "
            "not in the agent, whose baseline keeps none",
    "optimal_time": "baseline_memory: checkpoint count (), den (58,), num (58,), sum_r (), "
                    "agent count (), den ('any', 58), horizon (), num ('any', 58), "
                    "sum_r ('any', 1) (a memory saved for another episodic baseline",
}


@pytest.mark.parametrize("wanted", sorted(MEMORY_REFUSALS))
@pytest.mark.parametrize("impl", IMPLS)
def test_a_baseline_memory_the_agent_cannot_hold_is_refused_before_anything_is_restored(
        tmp_path, impl, wanted):
    # Before: the graph twin's Saver restored the weights and left a [58] memory in scalar
    # or [rows, 58] variables, failing at the next update; the eager twin raised TensorFlow's
    # own error, for some baselines after the weights were restored.
    path = _saved(tmp_path, impl, hidden=(8,), baseline="optimal_per_param")
    err = _refusal(impl, path, (8,), baseline=wanted)
    assert MEMORY_REFUSALS[wanted] in str(err)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_checkpoint_without_memory_still_restores_into_an_episodic_agent(tmp_path, impl):
    path = _saved(tmp_path, impl, hidden=(8,), baseline="none")
    agent = agent_class(impl)(_spec((8,)), ReinforceConfig(baseline="optimal_per_param"), seed=2)
    try:
        agent.restore(path)
    finally:
        agent.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_pathlike_prefix_or_its_directory_restores(tmp_path, impl):
    # The graph twin's Saver wrote a `checkpoint` file naming its prefix, the eager twin's
    # Checkpoint.write none: a directory is read by its one .index file in both.
    src = agent_class(impl)(_spec((8,)), ReinforceConfig(), seed=1)
    prefix = src.save(tmp_path / impl / "ckpt")  # a pathlib.Path
    want = src.get_weights()
    src.close()
    for where in (tmp_path / impl, prefix):
        agent = agent_class(impl)(_spec((8,)), ReinforceConfig(), seed=2)
        try:
            agent.restore(where)
            for name, value in agent.get_weights().items():
                np.testing.assert_array_equal(value, want[name], err_msg=f"{where}: {name}")
        finally:
            agent.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_directory_of_several_checkpoints_without_an_index_file_is_named(tmp_path, impl):
    agent = agent_class(impl)(_spec((8,)), ReinforceConfig(), seed=1)
    try:
        for name in ("a", "b"):
            agent.save(str(tmp_path / name))
        for stale in tmp_path.glob("checkpoint"):  # the graph twin's Saver's choice
            stale.unlink()
        with pytest.raises(FileNotFoundError, match=r"several checkpoint prefixes \(a, b\); "
                                                    "pass the prefix save\\(\\) returned"):
            agent.restore(tmp_path)
    finally:
        agent.close()
