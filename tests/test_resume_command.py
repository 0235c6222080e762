"""The ``--resume`` command printed after Ctrl-C (and a failed write, a lost worker) carries
``PYTHONPATH`` when the run's env module was found through it or the working directory:
without it a resume from another shell cannot import the module and refuses the run."""
from __future__ import annotations

import sys
import textwrap

import pytest

from pgtwin.cli import main
from pgtwin.train.resume_command import module_root, resume_command

PACKAGE = "pgtwin_resume_trial_envs"
"""A package the test writes under tmp_path: ``PACKAGE.cart`` registers ``TrialCart-v0``."""


@pytest.fixture
def user_envs(tmp_path, monkeypatch):
    """``PACKAGE`` in ``tmp_path / "user code"``, on ``PYTHONPATH`` and ``sys.path`` as a
    user's shell would put it; the directory it is found in."""
    root = tmp_path / "user code"
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "cart.py").write_text(textwrap.dedent("""
        import gymnasium as gym
        if "TrialCart-v0" not in gym.registry:
            gym.register("TrialCart-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv",
                         max_episode_steps=50)
    """))
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_module_root_is_the_directory_above_the_package(user_envs):
    __import__(f"{PACKAGE}.cart")
    # PACKAGE/cart.py: two levels up from the file; PACKAGE/__init__.py: two as well
    assert module_root(f"{PACKAGE}.cart") == user_envs.resolve()
    assert module_root(PACKAGE) == user_envs.resolve()
    assert module_root("not_imported_anywhere") is None


def test_an_installed_module_needs_no_pythonpath():
    assert resume_command("runs/a b", "gymnasium") == "pgtwin train --resume --logdir 'runs/a b'"
    assert resume_command("runs/x") == "pgtwin train --resume --logdir runs/x"


def test_ctrl_c_prints_a_resume_command_that_finds_the_env_module(tmp_path, capsys, monkeypatch,
                                                                 user_envs):
    def interrupted(settings, resume=False):  # after the run wrote its settings
        from pgtwin.train.run import run_paths, write_settings

        write_settings(run_paths(settings.logdir), settings)
        raise KeyboardInterrupt

    monkeypatch.setattr("pgtwin.train.run.train", interrupted)
    logdir = str(tmp_path / "run")
    code = main(["train", "--env", f"{PACKAGE}.cart:TrialCart-v0", "--logdir", logdir,
                 "--steps", "64", "--no-progress"])
    assert code == 130
    err = capsys.readouterr().err
    # "user code" holds a space: the directory is quoted for the shell. (Interrupted
    # before any checkpoint, the message says the command starts the run again.)
    assert err.startswith("pgtwin train: interrupted"), err
    assert (f"PYTHONPATH='{user_envs.resolve()}' pgtwin train --resume --logdir {logdir}"
            in err), err


def test_a_relative_logdir_is_made_absolute_where_the_command_carries_pythonpath(user_envs,
                                                                               monkeypatch,
                                                                               tmp_path):
    # The command is for another shell or directory: "runs/x" would name nothing there.
    __import__(f"{PACKAGE}.cart")
    monkeypatch.chdir(tmp_path)
    command = resume_command("runs/x", f"{PACKAGE}.cart")
    assert command.endswith(f"pgtwin train --resume --logdir {tmp_path / 'runs' / 'x'}")
