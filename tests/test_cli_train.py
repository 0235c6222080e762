"""``pgtwin train`` in-process on tiny runs: the files it writes, the ``--json`` summary, the
stopping rule, resume of settings, and argparse-style errors for bad arguments.

Tiny configs (a few envs, steps and updates) keep each run to about a second.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import gymnasium
import numpy as np
import pytest

from pgtwin_core.envs import make_vec_env
from pgtwin_core.specs import init_weights, spec_for_env
from pgtwin.cli import main
from pgtwin.cli.commands.train import add_parser, settings_from_args
from pgtwin.train.settings import defaults_for, for_episodic_baseline
from pgtwin.train.episode_log import read_episodes
from pgtwin.train.plots import trailing_mean
from pgtwin.train.run import load_weights

TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden", "8", "--no-progress"]


def _train(capsys, *argv) -> tuple[int, dict | None, str]:
    """Run ``pgtwin train argv``: (exit code, JSON summary or None, stderr)."""
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    summary = json.loads(lines[-1]) if "--json" in argv and code == 0 else None
    return code, summary, err


def _settings(*argv):
    """The ``RunSettings`` ``pgtwin train argv`` would run with (nothing is trained)."""
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return settings_from_args(parser.parse_args(["train", *argv]), parser)[0]


def _events(tb_dir: str) -> dict[str, list[tuple[int, float]]]:
    """Scalars in the event files under ``tb_dir``: {tag: [(step, value)]}."""
    import tensorflow as tf

    scalars: dict[str, list] = {}
    for name in sorted(os.listdir(tb_dir)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(tb_dir, name)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_a_tiny_cartpole_run_writes_every_artifact(tmp_path, capsys, impl):
    logdir = str(tmp_path / "run")
    code, summary, _ = _train(capsys, "--env", "CartPole-v1", "--impl", impl, "--seed", "1",
                              "--steps", "640", "--checkpoint-every", "4", "--logdir", logdir,
                              "--json", *TINY)
    assert code == 0
    # 640 steps / (4 envs x 16 steps) = 10 updates of 64 env steps.
    assert summary["updates"] == 10 and summary["env_steps"] == 640
    assert (summary["env"], summary["impl"], summary["seed"]) == ("CartPole-v1", impl, 1)
    assert summary["solved"] is False and summary["solved_at_env_steps"] is None
    assert summary["solved_at_wall_s"] is None and summary["wall_s"] > 0
    # The first iteration is one update's 4 x 16 env steps, and part of the loop's time.
    assert summary["first_iteration_env_steps"] == 64
    assert 0 < summary["first_iteration_s"] <= summary["wall_s"]

    episodes = read_episodes(os.path.join(logdir, "episodes.csv"))
    assert episodes["episode"].tolist() == list(range(len(episodes["episode"])))
    assert np.all(np.diff(episodes["env_steps"]) >= 0) and episodes["env_steps"][-1] <= 640
    # A CartPole episode earns 1 per step.
    np.testing.assert_array_equal(episodes["return"], episodes["length"])
    assert summary["final_mean_return"] == pytest.approx(np.mean(episodes["return"][-100:]))

    # Checkpoints every 4 updates plus the final one, the newest 2 kept: 8 and 10.
    assert sorted(os.listdir(os.path.join(logdir, "checkpoints"))) == [
        "update_00000008", "update_00000010"]
    assert open(os.path.join(logdir, "learning_curve.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert set(load_weights(os.path.join(logdir, "weights.npz"))) == {
        "policy/dense_0/kernel", "policy/dense_0/bias", "policy/head/kernel", "policy/head/bias"}

    scalars = _events(os.path.join(logdir, "tb"))
    for tag in ("losses/loss", "losses/grad_norm", "losses/entropy", "charts/mean_return_window",
                "charts/env_steps_per_s"):
        assert [step for step, _ in scalars[tag]] == [64 * k for k in range(1, 11)], tag
    # Initial policy is near uniform over 2 actions: entropy ~ log 2 = 0.693.
    assert scalars["losses/entropy"][0][1] == pytest.approx(np.log(2), abs=0.01)
    per_update = {}
    for update, ret in zip(episodes["update"], episodes["return"]):
        per_update.setdefault(update, []).append(ret)
    logged = dict(scalars["charts/episode_return"])
    assert logged == pytest.approx({64 * u: np.mean(r) for u, r in per_update.items()})


@pytest.mark.parametrize("env_id, impl", [("Pendulum-v1", "graph"),
                                          ("BatteryArbitrage-v0", "eager")])
def test_continuous_envs_train(tmp_path, capsys, env_id, impl):
    code, summary, _ = _train(capsys, "--env", env_id, "--impl", impl, "--steps", "400",
                              "--num-envs", "2", "--num-steps", "200", "--hidden", "8",
                              "--logdir", str(tmp_path / "run"), "--json", "--no-progress")
    assert code == 0 and summary["updates"] == 1 and summary["env_steps"] == 400
    assert summary["threshold"] is None and summary["solved"] is False


def test_lstm_torso_with_a_history_window(tmp_path, capsys):
    logdir = str(tmp_path / "run")
    code, summary, _ = _train(capsys, "--env", "CartPole-v1", "--torso", "lstm", "--history",
                              "3", "--steps", "128", "--logdir", logdir, "--json", *TINY)
    assert code == 0 and summary["updates"] == 2
    assert "policy/lstm/kernel" in load_weights(os.path.join(logdir, "weights.npz"))


def _first_solving_update(episodes, window, threshold):
    """Oracle from the CSV: the first update after which the mean of the last ``window``
    finished episodes is >= threshold (the window full)."""
    means = trailing_mean(episodes["return"], window)
    for update in np.unique(episodes["update"]):
        last = np.nonzero(episodes["update"] == update)[0][-1]
        if last + 1 >= window and means[last] >= threshold:
            return int(update)
    return None


@pytest.mark.parametrize("no_stop", [False, True])
def test_stops_when_the_window_mean_reaches_the_threshold(tmp_path, capsys, no_stop):
    # EasyCartPole-v0 has reward_threshold 15: reached within a few updates.
    logdir = str(tmp_path / "run")
    code, summary, _ = _train(capsys, "--env", "tests.cli_envs:EasyCartPole-v0", "--steps",
                              "1280", "--solve-window", "5", "--logdir", logdir, "--json",
                              *TINY, *(["--no-stop"] if no_stop else []))
    assert code == 0
    episodes = read_episodes(os.path.join(logdir, "episodes.csv"))
    solved_at = _first_solving_update(episodes, 5, 15.0)
    assert solved_at is not None and summary["solved"] is True and summary["threshold"] == 15.0
    assert summary["solved_at_env_steps"] == 64 * solved_at
    assert 0 < summary["solved_at_wall_s"] <= summary["wall_s"]
    assert summary["updates"] == (20 if no_stop else solved_at)


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_resume_with_a_larger_budget_continues_the_same_run(tmp_path, capsys, impl):
    # Oracle: one uninterrupted run of 4 updates. The resumed one runs 2, stops, resumes
    # for 2 more (Pendulum: a SyncVectorEnv whose 200-step episodes span the break).
    # --no-xla: the subject is the resume; the episodic resume below keeps XLA. The resume
    # is not given it, so it must keep the first run's choice.
    common = ["--env", "Pendulum-v1", "--impl", impl, "--seed", "4", "--num-envs", "2",
              "--num-steps", "64", "--hidden", "8", "--json", "--no-progress"]
    straight, logdir = str(tmp_path / "straight"), str(tmp_path / "run")
    assert _train(capsys, *common, "--no-xla", "--steps", "512", "--logdir", straight)[0] == 0
    code, first, _ = _train(capsys, *common, "--no-xla", "--steps", "256", "--logdir", logdir)
    assert code == 0
    code, summary, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "512",
                                "--json", "--no-progress")
    assert code == 0 and summary["updates"] == 4 and summary["env_steps"] == 512
    # The run's first iteration (2 envs x 64 steps) is the first segment's, kept in the
    # checkpoint, not the resumed segment's.
    assert summary["first_iteration_env_steps"] == first["first_iteration_env_steps"] == 128
    assert summary["first_iteration_s"] == first["first_iteration_s"]
    assert _settings("--resume", "--logdir", logdir).config.jit_compile is False
    assert summary["resumed_from"] == os.path.join(logdir, "checkpoints", "update_00000002")
    assert "resuming" in err and "exactly (env state restored)" in err
    want, got = (load_weights(os.path.join(d, "weights.npz")) for d in (straight, logdir))
    for name in want:
        np.testing.assert_array_equal(want[name], got[name], err_msg=name)
    want, got = (read_episodes(os.path.join(d, "episodes.csv")) for d in (straight, logdir))
    # 512 env steps = 256 per env: one 200-step episode each, begun before the break.
    assert len(want["episode"]) == 2 and want["env_steps"].tolist() == [400, 400]
    for col in ("episode", "update", "env_steps", "env_index", "return", "length"):
        np.testing.assert_array_equal(want[col], got[col], err_msg=col)
    # Resuming a finished run trains nothing more.
    code, summary, err = _train(capsys, "--resume", "--logdir", logdir, "--json", "--no-progress")
    assert code == 0 and summary["updates"] == 4
    # (the budget, without --steps, is the run's first one: 256)
    assert "nothing left to train: its 512 env steps reach the budget of 256 (raise --steps " \
           "to go on)" in err


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_resume_with_an_episodic_baseline_restores_its_memory(tmp_path, capsys, impl):
    # As above, with optimal_per_param: its memory of earlier batches' sums must travel with
    # the checkpoint, or the resumed run's third update would use a fresh one and part
    # from the uninterrupted run. CartPole's short episodes complete inside T = 64.
    common = ["--env", "CartPole-v1", "--impl", impl, "--seed", "2", "--num-envs", "2",
              "--num-steps", "64", "--hidden", "8", "--baseline", "optimal_per_param",
              "--baseline-memory", "0.5", "--no-stop", "--json", "--no-progress"]
    straight, logdir = str(tmp_path / "straight"), str(tmp_path / "run")
    assert _train(capsys, *common, "--steps", "512", "--logdir", straight)[0] == 0
    assert _train(capsys, *common, "--steps", "256", "--logdir", logdir)[0] == 0
    ckpt = os.path.join(logdir, "checkpoints", "update_00000002")
    with np.load(os.path.join(ckpt, "baseline_memory.npz")) as memory:
        assert memory["count"] > 0 and np.all(np.isfinite(memory["num"]))
    code, summary, err = _train(capsys, "--resume", "--logdir", logdir, "--steps", "512",
                                "--json", "--no-progress")
    assert code == 0 and summary["updates"] == 4 and "exactly (env state restored)" in err
    want, got = (load_weights(os.path.join(d, "weights.npz")) for d in (straight, logdir))
    for name in want:
        np.testing.assert_array_equal(want[name], got[name], err_msg=name)


def test_batches_without_a_complete_episode_are_skipped_and_counted(tmp_path, capsys):
    # CartPole's episodes last at least ~8 steps, so with T = 3 no batch holds a complete
    # episode: every update is skipped (not a crash), counted, and explained once.
    code, summary, err = _train(
        capsys, "--env", "CartPole-v1", "--impl", "graph", "--num-envs", "2", "--num-steps",
        "3", "--hidden", "8", "--baseline", "optimal_per_param", "--steps", "24", "--no-stop",
        "--json", "--no-progress", "--logdir", str(tmp_path))
    assert code == 0 and summary["updates"] == 4 and summary["skipped_updates"] == 4, summary
    assert err.count("holds no complete episode") == 1, err
    assert "--num-steps 3" in err and "baseline='optimal_per_param' skipped it" in err
    envs = make_vec_env("CartPole-v1", 2, 0)
    start = init_weights(spec_for_env(envs, "mlp", (8,)), 0, dtype="float32")
    envs.close()
    weights = load_weights(os.path.join(str(tmp_path), "weights.npz"))
    for name, w in start.items():  # nothing was applied: the initial weights (seed 0)
        np.testing.assert_array_equal(weights[name], w, err_msg=name)


def test_a_second_run_into_the_same_logdir_is_refused(tmp_path, capsys):
    argv = ["--env", "CartPole-v1", "--steps", "64", "--logdir", str(tmp_path), *TINY]
    assert _train(capsys, *argv)[0] == 0
    code, _, err = _train(capsys, *argv)
    assert code == 1 and "already holds a run: pass --resume" in err


# ---------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("argv, message", [
    (["--env", "CartPole-v1", "--steps", "-5"], "argument --steps: must be an integer >= 1, got -5"),
    (["--env", "CartPole-v1", "--gamma", "1.5"], "argument --gamma: must be in [0, 1], got 1.5"),
    (["--env", "CartPole-v1", "--impl", "torch"], "argument --impl: invalid choice: 'torch'"),
    (["--env", "CartPole-v1", "--lr", "nan"], "argument --lr: must be a finite number"),
    (["--env", "CartPole-v1", "--num-envs", "0"], "argument --num-envs: must be an integer >= 1"),
    (["--env", "CartPole-v1", "--hidden", "64,x"], "argument --hidden: must be comma-separated"),
    (["--env", "CartPole-v1", "--history", "4"], "--history 4 needs --torso lstm"),
    (["--env", "CartPole-v1", "--baseline-memory", "1"],
     "ReinforceConfig.baseline_memory=1.0 must be a number in [0, 1)"),
    (["--steps", "100"], "the following arguments are required: --env"),
    (["--env", "NoSuchEnv-v0"], "unknown env id 'NoSuchEnv-v0'"),
    (["--env", "Blackjack-v1"], "'Blackjack-v1' has observation space Tuple"),
    (["--env", "no_such_module:Foo-v0"], "cannot import env module 'no_such_module'"),
])
def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv, "--logdir", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "pgtwin train: error:" in err and message in err, err
    assert "Traceback" not in err


def test_unknown_env_lists_what_is_supported(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--env", "NoSuchEnv-v0", "--logdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert "Discrete or Box actions" in err and "CartPole-v1, Pendulum-v1, BatteryArbitrage-v0" in err
    # the usual cause with one's own env: the module that registers it was not named
    assert "import that module first (pgtwin train: --env MODULE:NoSuchEnv-v0" in err


def test_a_2d_observation_env_is_refused_before_tensorflow_naming_the_fix(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "tests.test_envs:PgtwinTestGrid-v0", "--logdir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'PgtwinTestGrid-v0' has 2-D observations (2, 3), and the mlp torso takes 1-D ones: " \
           "flatten them first (gymnasium.wrappers.FlattenObservation" in err


def _agent_tensorflow_refuses(*args, **kwargs):
    """An agent whose graph TensorFlow refuses: a [2, 3] x [4, 5] product, which its shape
    inference rejects with a ValueError raised inside tensorflow."""
    import tensorflow as tf

    with tf.Graph().as_default():
        tf.matmul(tf.zeros([2, 3]), tf.zeros([4, 5]))


def test_a_valueerror_from_tensorflow_is_a_failure_not_a_usage_error(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.setattr("pgtwin.train.run.agent_class", lambda impl: _agent_tensorflow_refuses)
    code, _, err = _train(capsys, "--env", "CartPole-v1", "--impl", "graph", "--steps", "64",
                          "--logdir", str(tmp_path / "run"), *TINY)
    assert code == 1
    first = err.split("\n")[0]
    assert first.startswith("pgtwin train: error: tensorflow raised ValueError while setting "
                            "up CartPole-v1 with the graph twin: "), err
    assert "Your settings were accepted" in err and "usage:" not in err
    # the traceback ends where TensorFlow raised, with the product's call above it
    assert "Traceback" in err and "_agent_tensorflow_refuses" in err


def test_a_valueerror_raised_by_pgtwin_stays_a_usage_error(tmp_path, capsys, monkeypatch):
    def refuses(spec, config, seed):  # a refusal raised inside pgtwin_core
        config.replace(update_path="cached", baseline="value")

    monkeypatch.setattr("pgtwin.train.run.agent_class", lambda impl: refuses)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "CartPole-v1", "--steps", "64", "--logdir",
              str(tmp_path / "run"), *TINY])
    assert exit_info.value.code == 2
    assert "ReinforceConfig.update_path='cached' cannot serve baseline='value'" in \
        capsys.readouterr().err


def test_a_run_stopped_before_its_first_checkpoint_resumes_from_update_0(tmp_path, capsys,
                                                                      monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
        yield  # a generator, as iterate_training is

    logdir = str(tmp_path / "run")
    argv = ["--env", "CartPole-v1", "--steps", "128", "--json", *TINY]
    with monkeypatch.context() as patch:
        patch.setattr("pgtwin.train.run.iterate_training", interrupted)
        code, _, err = _train(capsys, *argv, "--logdir", logdir)
    assert code == 130
    assert ("interrupted before the first checkpoint (one every 25 updates, "
            f"--checkpoint-every); pgtwin train --resume --logdir {logdir} starts the run "
            "again from update 0") in err, err
    code, resumed, err = _train(capsys, "--resume", "--logdir", logdir, "--json", "--no-progress")
    assert code == 0 and "starting the run again from update 0 with its settings" in err, err
    code, fresh, _ = _train(capsys, *argv, "--logdir", str(tmp_path / "fresh"))
    # 128 steps of 4 envs x 16: two updates, as a run never interrupted
    assert (resumed["updates"], resumed["env_steps"]) == (fresh["updates"], fresh["env_steps"]) \
        == (2, 128)
    assert len(read_episodes(os.path.join(logdir, "episodes.csv"))) == \
        len(read_episodes(str(tmp_path / "fresh" / "episodes.csv")))


def test_ctrl_c_before_the_run_wrote_anything_says_to_run_it_again(tmp_path, capsys,
                                                                   monkeypatch):
    # e.g. while the agent's graph is built: no run.json yet, so no --resume could work
    def interrupted(settings, resume=False):
        raise KeyboardInterrupt

    monkeypatch.setattr("pgtwin.train.run.train", interrupted)
    logdir = str(tmp_path / "run")
    code, _, err = _train(capsys, "--env", "CartPole-v1", "--logdir", logdir, *TINY)
    assert code == 130
    assert err == (f"pgtwin train: interrupted before the run wrote anything to {logdir}: run "
                   "the same command again to start it\n")


def test_a_dropped_natural_gradient_default_is_said(tmp_path, capsys):
    # Pendulum-v1's row trains with natural steps (KL 0.02, SGD at lr 1); Adam conflicts
    # with them, so the row's natural step is dropped, and now a note says so
    settings = _settings("--env", "Pendulum-v1", "--optimizer", "adam", "--logdir",
                         str(tmp_path))
    assert settings.config.natural_kl is None and settings.config.optimizer == "adam"
    err = capsys.readouterr().err
    assert err.startswith("pgtwin train: note: Pendulum-v1's default natural gradient "
                          "(natural_kl=0.02, sgd, lr 1) is off"), err
    _settings("--env", "Pendulum-v1", "--logdir", str(tmp_path))  # kept: no note
    assert capsys.readouterr().err == ""


def test_resume_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", "--logdir", str(tmp_path / "empty")])
    assert exit_info.value.code == 2
    assert "nothing to resume" in capsys.readouterr().err

    logdir = str(tmp_path / "run")
    assert _train(capsys, "--env", "CartPole-v1", "--steps", "64", "--logdir", logdir, *TINY)[0] == 0
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", "--logdir", logdir, "--lr", "0.5", "--impl", "graph"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "--resume cannot change the run's settings" in err
    assert "--impl (run: 'eager', given: 'graph')" in err
    lr = defaults_for("CartPole-v1").config.learning_rate  # the run took the CartPole default
    assert f"--lr (config.learning_rate) (run: {lr!r}, given: 0.5)" in err


@pytest.mark.parametrize("argv,num_envs,num_steps", [
    # CartPole-v1's episodes last up to 500 steps: T = 2 x 500, N = 128 x 128 // 1000 = 16
    (["--baseline", "optimal_per_param"], 16, 1000),
    # a per-step baseline keeps the row: 128 x 128
    (["--baseline", "optimal_scalar"], 128, 128),
    # a rollout shape given on the command line is kept as given
    (["--baseline", "optimal_time", "--num-steps", "64"], 128, 64),
    (["--baseline", "optimal_time", "--num-envs", "4"], 4, 128),
])
def test_episodic_baselines_get_a_rollout_long_enough_for_whole_episodes(
        tmp_path, capsys, argv, num_envs, num_steps):
    settings = _settings("--env", "CartPole-v1", "--logdir", str(tmp_path), *argv)
    assert (settings.config.num_envs, settings.config.num_steps) == (num_envs, num_steps)


def test_an_env_modules_time_limit_sets_the_episodic_rollout(tmp_path, monkeypatch):
    # The module is imported before the defaults are resolved, so its env's registered
    # limit of 300 steps is known: T = 2 x 300, N = 16 x 128 // 600 = 3 (the table's row
    # for an env it does not list is 16 envs x 128 steps). Before, the id was looked up
    # unregistered and 16 x 128 stayed: no batch held a complete episode.
    name = "pgtwin_time_limit_trial_envs"
    (tmp_path / f"{name}.py").write_text(
        "import gymnasium as gym\n"
        "if 'LimitTrial-v0' not in gym.registry:\n"
        "    gym.register('LimitTrial-v0', entry_point="
        "'gymnasium.envs.classic_control:CartPoleEnv', max_episode_steps=300)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        for argv in (["--env", f"{name}:LimitTrial-v0"],
                     ["--env-module", name, "--env", "LimitTrial-v0"]):
            settings = _settings(*argv, "--baseline", "optimal_time", "--logdir", str(tmp_path))
            assert (settings.config.num_envs, settings.config.num_steps) == (3, 600)
    finally:
        sys.modules.pop(name, None)
        gymnasium.registry.pop("LimitTrial-v0", None)


def test_an_env_module_given_as_a_file_names_the_module_to_give(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env-module", "./myenvs.py", "--env", "Mine-v0", "--logdir",
              str(tmp_path)])
    assert exit_info.value.code == 2
    assert ("env module './myenvs.py' is a file path; give the module's name as import "
            "would: 'myenvs'") in capsys.readouterr().err


def test_for_episodic_baseline_by_hand():
    row = defaults_for("CartPole-v1")  # 128 envs x 128 steps
    assert for_episodic_baseline(row, None) is row  # no time limit known: unchanged
    assert for_episodic_baseline(row, 64) is row  # T = 128 already holds 2 x 64
    longer = for_episodic_baseline(row, 100)  # T = 200, N = 128 * 128 // 200 = 81
    assert (longer.config.num_envs, longer.config.num_steps, longer.config.learning_rate) == (
        81, 200, row.config.learning_rate)
    assert for_episodic_baseline(row, 10_000).config.num_envs == 1  # never below one env


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_resume_with_obs_norm_and_schedules_equals_an_uninterrupted_run(tmp_path, capsys, impl):
    # As the resume test above, with the observation statistics, a cosine learning rate
    # and an annealed log-std floor: the statistics travel in the checkpoint, the
    # schedules are functions of the restored env-step counter (schedule_steps fixed at
    # the first run's 512), so the resumed run is the uninterrupted one, bit for bit.
    common = ["--env", "Pendulum-v1", "--impl", impl, "--seed", "4", "--num-envs", "2",
              "--num-steps", "64", "--hidden", "8", "--obs-norm", "--lr-schedule", "cosine",
              "--schedule-steps", "512", "--log-std-floor", "-0.6",
              "--log-std-floor-final", "-1.0", "--no-xla", "--json", "--no-progress"]
    straight, logdir = str(tmp_path / "straight"), str(tmp_path / "run")
    assert _train(capsys, *common, "--steps", "512", "--logdir", straight)[0] == 0
    assert _train(capsys, *common, "--steps", "256", "--logdir", logdir)[0] == 0
    ckpt = os.path.join(logdir, "checkpoints", "update_00000002")
    with np.load(os.path.join(ckpt, "obs_norm.npz")) as stats:
        assert stats["count"] == 256  # 2 envs x 2 x 64 steps, all valid (no episode ended)
    code, summary, _ = _train(capsys, "--resume", "--logdir", logdir, "--steps", "512",
                              "--json", "--no-progress")
    assert code == 0 and summary["updates"] == 4
    want, got = (load_weights(os.path.join(d, "weights.npz")) for d in (straight, logdir))
    for name in want:
        np.testing.assert_array_equal(want[name], got[name], err_msg=name)
    assert want["policy/log_std"].min() >= np.float32(-1.0)
    with np.load(os.path.join(straight, "obs_norm.npz")) as a, \
            np.load(os.path.join(logdir, "obs_norm.npz")) as b:
        # 512 steps, less each env's autoreset step after its 200-step episode: 510 valid.
        assert a["count"] == 510 and all(np.array_equal(a[k], b[k]) for k in a.files)
    # A checkpoint without its statistics is refused, naming the file (a checkpoint whose
    # manifest lists it would be refused earlier, by its checksums).
    from pgtwin.train.run_checkpoint import load_normalizer
    from pgtwin_core.obs_normalizer import ObsNormalizer

    with pytest.raises(ValueError, match="tmp.*obs_norm.npz is missing: the run normalises"):
        load_normalizer(str(tmp_path), ObsNormalizer(3))


def test_schedule_options_resolve_and_refuse(tmp_path, capsys):
    from pgtwin.train.settings import resolve

    s = resolve("Pendulum-v1", {"lr_schedule": "linear", "total_steps": 1234, "logdir": "x"})
    assert s.schedule_steps == 1234 and s.schedules().learning_rate_at(1234) == \
        pytest.approx(0.1 * s.config.learning_rate)
    assert resolve("Pendulum-v1", {"logdir": "x"}).schedule_steps is None
    with pytest.raises(SystemExit):
        main(["train", "--env", "Pendulum-v1", "--lr-schedule", "linear", "--lr-floor", "2",
              "--logdir", str(tmp_path / "r")])
    assert "lr_floor=2.0 must be a fraction in [0, 1]" in capsys.readouterr().err


def test_ctrl_c_under_a_strategy_prints_the_resume_command(tmp_path, capsys, monkeypatch):
    # The strategy path had no handler of its own: one line, "interrupted", and no way on.
    # A distributed run's checkpoints are its workers' shards.
    logdir = tmp_path / "run"

    def interrupted(settings, *args, **kwargs):
        (logdir / "checkpoints" / "worker_00000" / "update_00000004").mkdir(parents=True)
        (logdir / "run.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr("pgtwin.train.distributed_run.train_under_strategy", interrupted)
    code, _, err = _train(capsys, "--env", "CartPole-v1", "--strategy", "mirrored",
                          "--logdir", str(logdir), *TINY)
    assert code == 130
    assert err.endswith(f"pgtwin train: interrupted; resume with: pgtwin train --resume "
                        f"--logdir {logdir}\n"), err


def test_the_summary_lists_only_the_files_the_run_wrote(tmp_path):
    # --no-tensorboard writes no tb/: the last line named it anyway.
    import types

    from pgtwin.cli.commands.train import human_summary

    (tmp_path / "episodes.csv").write_text("")
    (tmp_path / "checkpoints").mkdir()
    result = types.SimpleNamespace(
        env="CartPole-v1", impl="eager", seed=0, updates=2, env_steps=128, wall_s=1.0,
        final_mean_return=None, solved=False, threshold=None, skipped_updates=0,
        logdir=str(tmp_path))
    assert human_summary(result).splitlines()[-1] == \
        f"logs: {tmp_path} (episodes.csv, checkpoints/)"


def test_resume_by_env_names_the_impl_and_seed_it_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "CartPole-v1__eager__s0__20261207-000000").mkdir(parents=True)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", "--env", "CartPole-v1", "--impl", "graph"])
    assert exit_info.value.code == 2
    assert ("--resume: no run of CartPole-v1 with --impl graph and --seed 0 found under runs/; "
            "pass --logdir, or the --impl and --seed the run was trained with"
            ) in capsys.readouterr().err


def test_a_resume_that_changes_a_store_true_flag_names_the_flag():
    from pgtwin.cli.commands.train import option_for

    assert option_for("deterministic") == "--deterministic"
    assert option_for("config.learning_rate") == "--lr (config.learning_rate)"


def test_a_run_started_from_python_resumes_from_the_cli_given_its_env_module(tmp_path, capsys,
                                                                            monkeypatch):
    # train(RunSettings(...)) with the env's module imported by the caller saves
    # env_module None; the CLI then needs --env-module to make the env, which --resume
    # refused as a change of the run's settings. A module that another saved module
    # replaced is still refused.
    name = "pgtwin_resume_trial_envs"
    (tmp_path / f"{name}.py").write_text(
        "import gymnasium as gym\n"
        "if 'ResumeTrial-v0' not in gym.registry:\n"
        "    gym.register('ResumeTrial-v0', entry_point="
        "'gymnasium.envs.classic_control:CartPoleEnv', max_episode_steps=50)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    logdir = str(tmp_path / "run")
    try:
        __import__(name)
        settings = _settings("--env", "ResumeTrial-v0", "--steps", "64", "--logdir", logdir,
                             *TINY)
        assert settings.env_module is None
        from pgtwin.train import train
        train(settings)
        code, _, err = _train(capsys, "--resume", "--logdir", logdir, "--env-module", name,
                              "--steps", "128")
        assert code == 0, err
        with open(os.path.join(logdir, "run.json")) as f:
            assert json.load(f)["env_module"] == name  # the next resume needs no module
        with pytest.raises(SystemExit):
            main(["train", "--resume", "--logdir", logdir, "--env-module", "json"])
        assert "env_module (run: 'pgtwin_resume_trial_envs', given: 'json')" in \
            capsys.readouterr().err
    finally:
        sys.modules.pop(name, None)
        gymnasium.registry.pop("ResumeTrial-v0", None)
