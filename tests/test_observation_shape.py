"""An observation whose shape changes mid-run is named: env index, rollout step, env-step,
expected and received shapes (issue 17, item 7), in ``collect`` and in ``pgtwin train``.

``tests.cli_envs:ShapeShiftCartPole-v0``: the sub-env reset with seed 2 (env index 2 under
``--seed 0``) returns 5 features instead of 4 on its 6th step call (index 5). With 4 envs x
4 steps per update that is rollout step 1 of update 2, and the env-step counter after it is
4 * 6 = 24 (the same arithmetic as the NaN tests in tests/test_reliability.py).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from pgtwin_core.envs import make_vec_env
from pgtwin_core.observation_shape import ObservationShapeError
from pgtwin_core.rollout import collect
from pgtwin_core.specs import spec_for_env
from pgtwin.train import checkpoints
from tests.cli_envs import train_to_its_failure  # (importing it registers the test envs)

WHAT = ("observation of shape (5,) from env 2 at rollout step 1 (env-step 24); expected (4,), "
        "the shape of its observation space")


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_collect_names_env_step_and_both_shapes(vectorization):
    envs = make_vec_env("ShapeShiftCartPole-v0", 4, seed=0, vectorization=vectorization)
    spec = spec_for_env(envs, "mlp", (8,))
    policy = lambda obs: np.zeros((obs.shape[0], 2))  # noqa: E731
    rng = np.random.default_rng(0)
    try:
        _, state = collect(envs, policy, spec, 4, rng)  # update 1: step calls 0..3
        with pytest.raises(ObservationShapeError) as info:
            collect(envs, policy, spec, 4, rng, state)
    finally:
        envs.close()
    if vectorization == "sync":
        assert str(info.value).startswith(WHAT)
    else:  # the worker's message, with where in the rollout it happened
        assert "observation of shape (5,) from env 2 at step; expected (4,)" in str(info.value)
        assert str(info.value).endswith("at rollout step 1 (env-step 24)")


def test_train_reports_it_and_keeps_the_checkpoint(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code = train_to_its_failure("ShapeShiftCartPole-v0", logdir)
    err = capsys.readouterr().err
    assert code == 1
    ckpt = checkpoints.checkpoint_path(os.path.join(logdir, "checkpoints"), 1)
    assert "ShapeShiftCartPole-v0 (eager) failed during update 2" in err
    assert WHAT in err and f"the last checkpoint {ckpt} is intact" in err
    assert "all input arrays must have the same shape" not in err
