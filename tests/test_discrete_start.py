"""``Discrete(n, start=s)`` actions (issue 17, item 3): the policy samples indices 0..n-1, the
env is stepped with ``s + index``, in both twins and across ``--resume``.

``tests.cli_envs:ShiftedActionCartPole-v0`` has ``Discrete(2, start=3)`` and raises on any
action outside {3, 4}, so an unmapped index (0 or 1) fails the run.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tests.cli_envs  # noqa: F401  (registers the test envs)
from pgtwin_core.envs import make_vec_env
from pgtwin_core.rollout import collect
from pgtwin_core.sampling import env_actions
from pgtwin_core.specs import PolicySpec, spec_for_env
from pgtwin.cli import main

ENV = "tests.cli_envs:ShiftedActionCartPole-v0"
TINY = ["--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--no-progress", "--json"]


def test_env_actions_shift_indices_by_start():
    spec = PolicySpec("categorical", (4,), 3, action_start=-1)
    np.testing.assert_array_equal(env_actions(spec, np.array([0, 1, 2])), [-1, 0, 1])
    plain = PolicySpec("categorical", (4,), 3)
    np.testing.assert_array_equal(env_actions(plain, np.array([0, 2])), [0, 2])


def test_action_start_is_for_categorical_policies_only():
    with pytest.raises(ValueError, match="action_start=2 is for categorical"):
        PolicySpec("gaussian", (3,), 1, action_start=2)


def test_collect_keeps_indices_and_steps_the_env_with_start_plus_index():
    envs = make_vec_env("ShiftedActionCartPole-v0", 2, seed=0, vectorization="sync")
    spec = spec_for_env(envs, "mlp", (8,))
    assert spec.action_start == 3
    # logits favour index 1 for env 0 and index 0 for env 1, strongly
    params = np.array([[-50.0, 50.0], [50.0, -50.0]])
    batch, _ = collect(envs, lambda obs: params, spec, 3, np.random.default_rng(0))
    assert batch.actions.tolist() == [[1, 0]] * 3  # indices, for the log-probs
    received = [env.get_wrapper_attr("received") for env in envs.envs]
    assert received == [[4, 4, 4], [3, 3, 3]]  # 3 + index
    envs.close()


def _train(capsys, *argv):
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out.strip().splitlines()[-1]) if code == 0 else None), err


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_both_twins_train_and_resume_on_a_shifted_discrete_space(tmp_path, capsys, impl):
    logdir = str(tmp_path / impl)
    code, summary, err = _train(capsys, "--env", ENV, "--impl", impl, "--steps", "32",
                                "--checkpoint-every", "1", "--logdir", logdir, *TINY)
    assert code == 0, err
    assert summary["updates"] == 2
    code, summary, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "64",
                                "--no-progress", "--json")
    assert code == 0, err
    assert summary["updates"] == 4 and summary["resumed_from"] is not None
    assert os.path.exists(os.path.join(logdir, "weights.npz"))
