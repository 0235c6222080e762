"""The natural policy gradient step (``pgtwin_core.natural_gradient``, ``natural_kl``).

Three ways: the numpy step against a dense solve and a one-parameter case by hand; a whole
update of each twin against the numpy policy oracle (central-difference scores, a dense
Fisher, ``np.linalg.solve``); and what the step promises, its KL between the old and the
new policy, measured with the closed-form KL on a large on-policy batch. Then the
refusals, the guard against non-finite input, and the resolver's rules.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.config import NaturalConflictError, ReinforceConfig
from pgtwin_core.natural_gradient import conjugate_gradient, natural_step
from pgtwin_core.specs import PolicySpec
from pgtwin.train.settings import resolve
from pgtwin.twins import agent_class

from tests import numpy_policy
from tests.per_sample_cases import KINDS, random_inputs, random_weights
from tests.synthetic_batches import batch_of, random_batch


def dense_step(scores, weights, grad, max_kl, damping):
    """The module doc's d with F formed and solved exactly (the oracle)."""
    f = scores.T @ (weights[:, None] * scores) + damping * np.eye(grad.size)
    x = np.linalg.solve(f, grad)
    return np.sqrt(2.0 * max_kl / (x @ f @ x)) * x


# ----------------------------------------------------------------- the numpy step
def test_conjugate_gradient_solves_in_p_steps_and_stops_at_zero():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((6, 6))
    a = m @ m.T + 0.5 * np.eye(6)
    b = rng.standard_normal(6)
    np.testing.assert_allclose(conjugate_gradient(lambda v: a @ v, b, 6),
                               np.linalg.solve(a, b), rtol=1e-9)
    calls = []
    x = conjugate_gradient(lambda v: calls.append(v) or a @ v, np.zeros(6), 10)
    assert not x.any() and not calls  # b = 0: x = 0 without a product


def test_one_parameter_step_by_hand():
    # P = 1, scores 1 and 3 weighted 1/2 each: F = 0.5 * 1 + 0.5 * 9 = 5, damped 5.5.
    # x = g / 5.5 and x F x = g^2 / 5.5, so d = sqrt(2 delta / (g^2 / 5.5)) g / 5.5
    # = sign(g) sqrt(2 delta / 5.5): at delta = 0.1, sqrt(0.2 / 5.5) = 0.190693...
    found = natural_step(np.array([[1.0], [3.0]]), np.array([0.5, 0.5]), np.array([2.0]),
                         max_kl=0.1, damping=0.5, iters=3)
    assert found.step == pytest.approx([np.sqrt(0.2 / 5.5)], rel=1e-12)
    assert found.residual == pytest.approx(0.0, abs=1e-12)
    flipped = natural_step(np.array([[1.0], [3.0]]), np.array([0.5, 0.5]), np.array([-7.0]),
                           max_kl=0.1, damping=0.5, iters=3)
    assert flipped.step == pytest.approx([-np.sqrt(0.2 / 5.5)], rel=1e-12)  # size from delta


@pytest.mark.parametrize("b,p", [(30, 8), (5, 12)])  # B > P, and P > B (F singular, damped)
def test_step_matches_a_dense_solve(b, p):
    rng = np.random.default_rng(b * p)
    scores = rng.standard_normal((b, p)) * rng.uniform(0.1, 3.0, p)
    weights = rng.uniform(0.0, 1.0, b)
    weights /= weights.sum()
    grad = rng.standard_normal(p)
    found = natural_step(scores, weights, grad, max_kl=0.02, damping=0.1, iters=p)
    want = dense_step(scores, weights, grad, 0.02, 0.1)
    np.testing.assert_allclose(found.step, want, rtol=1e-7)
    f = scores.T @ (weights[:, None] * scores) + 0.1 * np.eye(p)
    assert 0.5 * found.step @ f @ found.step == pytest.approx(0.02, rel=1e-7)
    assert found.residual < 1e-6
    few = natural_step(scores, weights, grad, max_kl=0.02, damping=0.1, iters=2)
    assert few.residual > found.residual  # fewer CG steps: a direction less converged


def test_zero_gradient_is_no_step_and_non_finite_input_a_nan_step():
    scores, weights = np.ones((3, 2)), np.full(3, 1 / 3)
    assert not natural_step(scores, weights, np.zeros(2), 0.01, 0.1, 5).step.any()
    bad = scores.copy()
    bad[1, 0] = np.nan  # the twin's guarded apply refuses a NaN step: nothing changes
    assert np.isnan(natural_step(bad, weights, np.ones(2), 0.01, 0.1, 5).step).all()
    assert np.isnan(natural_step(scores, weights, np.array([np.inf, 0]), 0.01, 0.1, 5).step).all()
    with pytest.raises(ValueError, match=r"scores \(3, 2\), weights \(2,\) and grad \(2,\)"):
        natural_step(scores, weights[:2], np.ones(2), 0.01, 0.1, 5)


# ----------------------------------------------------------------- whole updates
NATURAL = dict(optimizer="sgd", learning_rate=1.0, natural_kl=0.05, natural_damping=0.1,
               natural_cg_iters=200, normalize_returns=False, gamma=0.9, natural_backtracks=0)


def _flat(arrays: dict, names) -> np.ndarray:
    return np.concatenate([np.reshape(arrays[n], (arrays[n].shape[0], -1)) for n in names], 1)


@pytest.mark.parametrize("impl", ["graph", "eager"])
@pytest.mark.parametrize("kind", ["categorical_mlp", "gaussian_mlp", "gaussian_lstm"])
def test_an_update_is_the_oracles_natural_step(impl, kind):
    """float64: the weights after one update are w - d, d from the numpy policy's central-
    difference scores, g = -sum_i w_i A_i s_i (no entropy term) and a dense solve."""
    spec = KINDS[kind]
    config = ReinforceConfig(dtype="float64", baseline="mean", num_envs=3, num_steps=6,
                             **NATURAL)
    weights = random_weights(spec, seed=3, dtype="float64")
    batch = random_batch(spec, 6, 3, seed=4)  # with ends and autoreset steps (w_i = 0)
    agent = agent_class(impl)(spec, config, weights=weights)
    inputs = agent.inputs(batch)
    names = list(weights)
    scores = _flat(numpy_policy.per_sample_gradients(spec, weights, inputs.obs, inputs.actions),
                   names)
    grad = -(inputs.weights * inputs.advantages) @ scores
    step = dense_step(scores, inputs.weights, grad, config.natural_kl, config.natural_damping)
    assert agent.update(batch)["applied"]
    after = agent.get_weights()
    got = np.concatenate([np.ravel(weights[n] - after[n]) for n in names])
    # Central differences err by ~1e-9 of each score; the solve carries that to ~1e-8.
    np.testing.assert_allclose(got, step, rtol=1e-6, atol=1e-7 * np.abs(step).max())
    agent.close()


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_the_step_moves_the_policy_by_at_most_about_delta_in_kl(impl):
    """The promise: actions drawn from the policy make sum_i w_i s_i s_i^T a sample of the
    Fisher, so the mean KL(pi_old || pi_new) over the batch's states is 1/2 d^T F d to
    second order, which the damped step holds at delta: 1/2 d^T (F + lambda I) d = delta.
    4,096 on-policy steps, delta = 1e-4, lambda = 1e-3: 0.79 delta (a step twice or half
    as long, or without the square root, lands far outside). With lambda near 0 the step
    grows along the Fisher's near-flat directions and leaves the quadratic model (35x delta
    at lambda = 1e-6): that is what the damping is for."""
    spec = PolicySpec("categorical", (4,), 3, hidden=(8,))
    weights = random_weights(spec, seed=7, dtype="float64")
    rng = np.random.default_rng(8)
    obs = rng.standard_normal((4096, 4))
    probs = _softmax(numpy_policy.dist_params(spec, weights, obs))
    actions = (probs.cumsum(1) > rng.uniform(size=(4096, 1))).argmax(1)
    batch = batch_of(obs, actions, rng.standard_normal(4096))
    config = ReinforceConfig(dtype="float64", baseline="mean", num_envs=1, num_steps=4096,
                             **{**NATURAL, "natural_kl": 1e-4, "natural_damping": 1e-3})
    agent = agent_class(impl)(spec, config, weights=weights)
    assert agent.update(batch)["applied"]
    new = _softmax(numpy_policy.dist_params(spec, agent.get_weights(), obs))
    kl = np.sum(probs * (np.log(probs) - np.log(new)), axis=-1).mean()
    assert 0.6e-4 < kl <= 1.05e-4
    agent.close()


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_a_non_finite_reward_leaves_every_weight(impl):
    spec = KINDS["categorical_mlp"]
    config = ReinforceConfig(num_envs=1, num_steps=6, **NATURAL)
    agent = agent_class(impl)(spec, config, weights=random_weights(spec))
    obs, actions = random_inputs(spec, 6, seed=1)
    rewards = np.ones(6)
    rewards[4] = np.inf
    before = agent.get_weights()
    batch = batch_of(obs, actions, rewards)
    try:
        metrics = agent.update(batch)
    except ValueError as err:  # the inputs' own check may name the reward first
        assert "rewards" in str(err)
    else:
        assert metrics["applied"] is False
    after = agent.get_weights()
    assert all(np.array_equal(before[n], after[n]) for n in before)
    agent.close()


@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_the_line_search_halves_a_step_past_the_kl_until_it_holds(impl):
    """delta = 20 is far past the quadratic model: the whole step's measured KL is over
    1.5 delta or the surrogate rises, so the line search keeps 2^-k of it for some k >= 1,
    and what it kept passes both tests (measured here with the numpy oracle). A small
    delta's step passes whole."""
    spec = KINDS["categorical_mlp"]
    weights = random_weights(spec, seed=1, dtype="float64")
    batch = random_batch(spec, 64, 4, seed=2)
    for delta, whole in ((20.0, False), (1e-3, True)):  # 20: a quarter is kept here
        config = ReinforceConfig(dtype="float64", baseline="mean", num_envs=4, num_steps=64,
                                 **{**NATURAL, "natural_kl": delta, "natural_backtracks": 10})
        full = agent_class(impl)(spec, config.replace(natural_backtracks=0), weights=weights)
        searched = agent_class(impl)(spec, config, weights=weights)
        assert full.update(batch)["applied"]
        metrics = searched.update(batch)
        assert metrics["applied"] and metrics["natural_cg_residual"] < 1e-6
        step_fraction, step_kl = metrics["natural_fraction"], metrics["natural_kl"]
        inputs = searched.inputs(batch)
        d_full = np.concatenate([np.ravel(weights[n] - full.get_weights()[n]) for n in weights])
        d_kept = np.concatenate([np.ravel(weights[n] - searched.get_weights()[n])
                                 for n in weights])
        fraction = np.linalg.norm(d_kept) / np.linalg.norm(d_full)
        assert fraction == pytest.approx(step_fraction, rel=1e-9)
        assert (fraction == 1.0) == whole, fraction
        old = numpy_policy.dist_params(spec, weights, inputs.obs)
        new = numpy_policy.dist_params(spec, searched.get_weights(), inputs.obs)
        kl = inputs.weights @ np.sum(_softmax(old) * (np.log(_softmax(old))
                                                      - np.log(_softmax(new))), axis=1)
        assert kl <= 1.5 * delta and kl == pytest.approx(step_kl, rel=1e-9)
        ratio = np.exp(numpy_policy.log_prob(spec, new, inputs.actions)
                       - numpy_policy.log_prob(spec, old, inputs.actions))
        assert -(inputs.weights * inputs.advantages) @ ratio < -(inputs.weights @ inputs.advantages)
        full.close()
        searched.close()


# ----------------------------------------------------------------- refusals, resolver
@pytest.mark.parametrize("fields,message", [
    (dict(), "cannot serve optimizer='adam': Adam would rescale each coordinate"),
    (dict(optimizer="sgd", max_grad_norm=0.5), "cannot serve max_grad_norm=0.5: the KL radius"),
    (dict(optimizer="sgd", baseline="optimal_time"), "cannot serve baseline='optimal_time'"),
    (dict(optimizer="sgd", update_path="cached"), "cannot serve update_path='cached'"),
])
def test_the_config_refuses_what_the_natural_step_cannot_serve(fields, message):
    with pytest.raises(NaturalConflictError, match=r"ReinforceConfig\.natural_kl=0\.01 " + message):
        ReinforceConfig(natural_kl=0.01, **fields)
    with pytest.raises(ValueError, match="natural_kl=0 must be None .* or a finite number > 0"):
        ReinforceConfig(natural_kl=0, optimizer="sgd")
    with pytest.raises(ValueError, match="natural_cg_iters=0 must be an int >= 1"):
        ReinforceConfig(natural_cg_iters=0)


def test_the_distributed_agent_refuses_it():
    from eager.distributed import DistributedReinforceAgent

    with pytest.raises(ValueError, match="natural_kl=0.01 is not supported under a "
                                         "tf.distribute strategy yet"):
        DistributedReinforceAgent(KINDS["categorical_mlp"],
                         ReinforceConfig(natural_kl=0.01, optimizer="sgd"))


def test_resolve_fills_sgd_at_one_and_drops_a_rows_natural_step_on_conflict(monkeypatch):
    from pgtwin.train import settings as table

    c = resolve("CartPole-v1", {"natural_kl": 0.01, "logdir": "x"}).config
    assert (c.natural_kl, c.optimizer, c.learning_rate) == (0.01, "sgd", 1.0)
    c = resolve("CartPole-v1", {"natural_kl": 0.01, "learning_rate": 0.5, "logdir": "x"}).config
    assert (c.optimizer, c.learning_rate) == ("sgd", 0.5)
    with pytest.raises(NaturalConflictError, match="cannot serve optimizer='adam'"):
        resolve("CartPole-v1", {"natural_kl": 0.01, "optimizer": "adam", "logdir": "x"})
    monkeypatch.setitem(table.ENV_OVERRIDES, "CartPole-v1",
                        {**table.ENV_OVERRIDES["CartPole-v1"], "natural_kl": 0.02})
    c = resolve("CartPole-v1", {"logdir": "x"}).config  # the row's own rate stays
    assert (c.natural_kl, c.optimizer, c.learning_rate) == (0.02, "sgd", 2.5e-2)
    monkeypatch.setitem(table.ENV_OVERRIDES, "Acrobot-v1",
                        {**table.ENV_OVERRIDES["Acrobot-v1"], "natural_kl": 0.02})
    c = resolve("Acrobot-v1", {"logdir": "x"}).config  # no rate in the row: the whole step
    assert (c.natural_kl, c.optimizer, c.learning_rate) == (0.02, "sgd", 1.0)
    c = resolve("Acrobot-v1", {"optimizer": "adam", "logdir": "x"}).config
    assert (c.natural_kl, c.optimizer, c.learning_rate) == (None, "adam", 1e-2)
    # A choice the row's natural step cannot serve drops it (and the SGD it brings).
    for given in ({"optimizer": "adam"}, {"max_grad_norm": 1.0},
                  {"baseline": "optimal_per_param"}):
        c = resolve("CartPole-v1", {**given, "logdir": "x"}).config
        assert c.natural_kl is None and c.optimizer == given.get("optimizer", "adam")
        assert c.learning_rate == table.ENV_OVERRIDES["CartPole-v1"]["learning_rate"]


# ----------------------------------------------------------------- pgtwin train
@pytest.mark.parametrize("impl", ["graph", "eager"])
def test_a_resumed_natural_run_equals_an_uninterrupted_one(tmp_path, capsys, impl):
    """Pendulum-v1's row (natural steps, the value net with GAE, its Adam under the
    policy's SGD, obs_norm), stopped after 2 updates and resumed for 2 more: the weights
    equal the uninterrupted run's bit for bit (the natural step holds no state of its own;
    the value net's Adam and the statistics travel in the checkpoint)."""
    import json

    from pgtwin.cli import main
    from pgtwin.train.run import load_weights

    # --no-xla: the subject is the resume (tests/test_cli_train.py resumes under XLA).
    common = ["--env", "Pendulum-v1", "--impl", impl, "--seed", "3", "--num-envs", "2",
              "--num-steps", "64", "--hidden", "8", "--no-xla", "--json", "--no-progress"]

    def train(*argv):
        code = main(["train", *argv])
        out = capsys.readouterr().out.strip().splitlines()
        assert code == 0
        return json.loads(out[-1])

    straight, logdir = str(tmp_path / "straight"), str(tmp_path / "run")
    train(*common, "--steps", "512", "--logdir", straight)  # 4 updates of 2 x 64 steps
    train(*common, "--steps", "256", "--logdir", logdir)
    with open(os.path.join(logdir, "run.json")) as f:
        saved = json.load(f)["config"]
    assert (saved["natural_kl"], saved["optimizer"], saved["learning_rate"]) == (0.02, "sgd", 1.0)
    assert train("--resume", "--logdir", logdir, "--steps", "512", "--json",
                 "--no-progress")["updates"] == 4
    want, got = (load_weights(os.path.join(d, "weights.npz")) for d in (straight, logdir))
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(want[name], got[name], err_msg=name)


def test_strategy_drops_the_rows_natural_step_and_refuses_a_given_one(capsys, monkeypatch):
    import argparse

    from pgtwin.cli.commands import train as train_command

    monkeypatch.delenv("TF_CONFIG", raising=False)
    parser = argparse.ArgumentParser(prog="pgtwin")
    train_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--env", "Pendulum-v1", "--strategy", "mirrored"])
    settings, _ = train_command.settings_from_args(args, parser)
    assert settings.config.natural_kl == 0.02  # the row's, or this test proves nothing
    kept = train_command._without_table_only_options(args, settings).config
    # The SGD at 1 goes with it: Adam at the table's rate, as the row without it has.
    assert (kept.natural_kl, kept.optimizer, kept.learning_rate) == (None, "adam", 1e-2)
    assert "natural_kl=0.02" in capsys.readouterr().err
    given = parser.parse_args(["train", "--env", "CartPole-v1", "--strategy", "mirrored",
                               "--natural-kl", "0.01"])
    with pytest.raises(SystemExit):
        train_command.run(given, parser)
    assert "--natural-kl is not available under --strategy" in capsys.readouterr().err
