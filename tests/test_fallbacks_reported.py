"""Fallbacks are said and counted, not silent (issue 17, beyond the list): an env whose
state cannot be checkpointed is said when the run starts and reported in the summary
(``resume_exact``), and its resume says it reseeded the envs.
"""
from __future__ import annotations

import json

import tests.cli_envs  # noqa: F401  (registers the test envs)
from pgtwin.cli import main

TINY = ["--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--no-progress", "--json"]


def _train(capsys, *argv):
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out.strip().splitlines()[-1]) if code == 0 else None, err


def test_an_env_that_cannot_be_checkpointed_is_said_and_reported(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code, summary, err = _train(capsys, "--env", "tests.cli_envs:UnpicklableCartPole-v0",
                                "--steps", "32", "--checkpoint-every", "1", "--logdir", logdir,
                                *TINY)
    assert code == 0, err
    assert summary["resume_exact"] is False
    assert "UnpicklableCartPole-v0: the env's state cannot be checkpointed" in err
    assert "a --resume of this run will continue with reseeded envs" in err
    code, summary, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "48",
                                "--no-progress", "--json")
    assert code == 0 and summary["resume_exact"] is False
    assert "with reseeded envs (this env's state cannot be checkpointed)" in err


def test_an_env_that_can_be_checkpointed_says_nothing(tmp_path, capsys):
    code, summary, err = _train(capsys, "--env", "CartPole-v1", "--steps", "32",
                                "--logdir", str(tmp_path / "run"), *TINY)
    assert code == 0 and summary["resume_exact"] is True
    assert "cannot be checkpointed" not in err


def test_deterministic_with_an_env_that_cannot_be_checkpointed_is_a_usage_error(tmp_path,
                                                                                 capsys):
    # It exited 1, as a run that failed; the flag and the env are the user's settings.
    logdir = tmp_path / "run"
    try:
        code = main(["train", "--env", "tests.cli_envs:UnpicklableCartPole-v0",
                     "--deterministic", "--steps", "32", "--logdir", str(logdir), *TINY])
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--deterministic needs an env whose state can be checkpointed: cannot snapshot " \
           "env 'UnpicklableCartPole-v0': Can't pickle local object" in err, err
    assert "drop --deterministic" in err
    assert not (logdir / "checkpoints").exists()  # refused before anything was written
