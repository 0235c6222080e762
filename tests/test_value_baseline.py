"""``baseline='value'`` in both twins: the value net against a numpy oracle and finite
differences, the advantages it gives (fit after vs before), checkpoints (saved, refused,
resumed bit for bit), and the config it is built from."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pgtwin_core.advantages import training_inputs
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import IncompatibleCheckpointError
from pgtwin_core.returns import discounted_returns, return_scale
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin_core.value_path import ValueInputs
from pgtwin_core.value_spec import init_value_weights, time_feature, value_spec
from pgtwin.twins import agent_class

SPEC = PolicySpec("categorical", (2,), 2, hidden=(3,))
IMPLS = ["graph", "eager"]


def config(**changes) -> ReinforceConfig:
    base = dict(baseline="value", dtype="float64", num_envs=2, num_steps=5, value_horizon=4,
                value_learning_rate=0.1, value_fit_steps=2, optimizer="sgd")
    return ReinforceConfig(**{**base, **changes})


def batch() -> Batch:
    """Two envs, T = 5: env 0 ends at t = 1 (terminated), autoresets, runs 2 more steps (cut);
    env 1 runs 5 steps from an episode begun 3 steps before the batch (recorded)."""
    rng = np.random.default_rng(4)
    valid = np.ones((5, 2), bool)
    valid[2, 0] = False
    terminated = np.zeros((5, 2), bool)
    terminated[1, 0] = True
    steps = np.array([[0, 3], [1, 4], [-1, 5], [0, 6], [1, 7]])
    return Batch(obs=rng.normal(size=(5, 2, 2)), actions=rng.integers(0, 2, (5, 2)),
                 rewards=np.where(valid, rng.normal(size=(5, 2)), 0.0), terminated=terminated,
                 truncated=np.zeros((5, 2), bool), log_probs=np.zeros((5, 2)), valid=valid,
                 next_obs=np.zeros((2, 2)), episode_returns=np.zeros(1),
                 episode_lengths=np.array([2]), episode_steps=steps)


def numpy_z(weights, obs, tau):
    """The oracle of the standardised output: z = head(tanh([obs, tau] @ W0 + b0))."""
    x = np.concatenate([obs, tau[:, None]], axis=1)
    h = np.tanh(x @ weights["value/dense_0/kernel"] + weights["value/dense_0/bias"])
    return (h @ weights["value/head/kernel"] + weights["value/head/bias"])[:, 0]


def numpy_values(weights, obs, tau):
    """V = return_mean + return_std * z."""
    return (weights["value/return_mean"][0]
            + weights["value/return_std"][0] * numpy_z(weights, obs, tau))


def test_value_spec_names_and_shapes():
    # MLP: obs_dim 2 + the time feature -> 3 inputs; hidden (3,) as the policy's.
    assert value_spec(SPEC, config()).weight_shapes() == {
        "value/dense_0/kernel": (3, 3), "value/dense_0/bias": (3,),
        "value/head/kernel": (3, 1), "value/head/bias": (1,)}
    assert list(value_spec(SPEC, config()).variable_shapes())[4:] == [
        "value/return_mean", "value/return_std"]
    # LSTM of 4 units over a 3-step window of 2 features, then the time feature.
    lstm = PolicySpec("categorical", (3, 2), 2, torso="lstm", hidden=(4,))
    assert value_spec(lstm, config(value_hidden=(4, 5))).weight_shapes() == {
        "value/lstm/kernel": (6, 16), "value/lstm/bias": (16,),
        "value/dense_0/kernel": (5, 5), "value/dense_0/bias": (5,),
        "value/head/kernel": (5, 1), "value/head/bias": (1,)}


def test_time_feature_is_t_over_the_horizon():
    # env 1's episode began before the batch: t = 3..7, over value_horizon 4.
    tau = time_feature(batch(), config())
    np.testing.assert_allclose(tau[:, 1], [0.75, 1.0, 1.25, 1.5, 1.75])
    np.testing.assert_allclose(tau[:, 0], [0.0, 0.25, 0.0, 0.0, 0.25])
    assert not time_feature(batch(), config(value_horizon=0)).any()


@pytest.mark.parametrize("impl", IMPLS)
def test_values_match_numpy_and_gradients_match_finite_differences(impl):
    agent = agent_class(impl)(SPEC, config(), seed=2)
    net, b = agent.value_net, batch()
    np.testing.assert_array_equal(net.get_weights()["value/head/kernel"],
                                  init_value_weights(value_spec(SPEC, config()), 2,
                                                     dtype="float64")["value/head/kernel"])
    g = discounted_returns(b.rewards, b.terminated, b.truncated, 0.99)
    fed = ValueInputs(b, config(), SPEC, g)
    mean, std, args = fed.standardised()
    # y = (G - m) / sd over the 9 valid steps (population std), 0 on the autoreset step.
    valid = b.valid.reshape(-1)
    g_valid = g.reshape(-1)[valid]
    np.testing.assert_allclose([mean, std], [g_valid.mean(), g_valid.std()], rtol=1e-12)
    np.testing.assert_allclose(args[2][valid], (g_valid - g_valid.mean()) / g_valid.std(),
                               rtol=1e-12)
    net.set_target_stats(mean, std)
    weights = net.get_weights()
    np.testing.assert_allclose(net.predict(fed.obs, fed.tau),
                               numpy_values(weights, fed.obs, fed.tau), rtol=1e-12)

    def loss(w):  # 0.5 sum_i w_i (z_i - y_i)^2 over the 9 valid steps
        return 0.5 * np.sum(fed.weights * (numpy_z(w, fed.obs, fed.tau) - args[2]) ** 2)

    value, grads = net.loss_and_gradients(*args)
    np.testing.assert_allclose(value, loss(weights), rtol=1e-12)
    eps = 1e-6
    for name, w in weights.items():
        fd = np.zeros_like(w)
        if name.startswith("value/return_"):
            continue  # the statistics are set, not trained
        for idx in np.ndindex(w.shape):
            up, down = dict(weights), dict(weights)
            up[name], down[name] = w.copy(), w.copy()
            up[name][idx] += eps
            down[name][idx] -= eps
            fd[idx] = (loss(up) - loss(down)) / (2 * eps)
        np.testing.assert_allclose(grads[name], fd, rtol=1e-6, atol=1e-9, err_msg=name)
    assert set(grads) == set(value_spec(SPEC, config()).weight_shapes())
    agent.close()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("fit", ["after", "before"])
def test_advantages_use_the_net_of_their_fit(impl, fit):
    # after: A = (G - V_old) / s, then the fit; before: the fit, then A = (G - V_new) / s.
    # The fit: the statistics set to this batch's (m, sd), then 2 SGD steps
    # w <- w - lr * grad on y = (G - m) / sd, the gradient from the twin's own
    # (finite-difference checked) value loss; V = m + sd * z. The policy step sees A
    # through its gradient: compared with the policy gradient at the expected A. Both twins
    # keep a learning rate rounded to float32 (as Keras does; legacy_graph/optimizers.py),
    # so the oracle does too.
    cfg = config(value_fit=fit)
    agent = agent_class(impl)(SPEC, cfg, seed=2)
    other = agent_class(impl)(SPEC, cfg.replace(baseline="none"), seed=2)
    b = batch()
    g = discounted_returns(b.rewards, b.terminated, b.truncated, cfg.gamma)
    fed = ValueInputs(b, cfg, SPEC, g)
    w = agent.value_net.get_weights()
    mean, std, args = fed.standardised()
    agent.value_net.set_target_stats(mean, std)
    stepped = agent.value_net.get_weights()
    for _ in range(2):
        _, grads = agent.value_net.loss_and_gradients(*args)
        agent.value_net.set_weights({n: stepped[n] - float(np.float32(0.1)) * grads.get(n, 0.0)
                                     for n in stepped})
        stepped = agent.value_net.get_weights()
    agent.value_net.set_weights(w)
    v = numpy_values(stepped if fit == "before" else w, fed.obs, fed.tau)
    scale = return_scale(np.where(b.valid, g, 0.0), mask=b.valid)
    want = np.where(b.valid.reshape(-1), (g.reshape(-1) - v) / scale, 0.0)
    before = agent.get_weights()
    metrics = agent.update(b)
    got = {n: before[n] - agent.get_weights()[n] for n in before}  # lr * gradient
    inputs = training_inputs(b, cfg.replace(baseline="none"), SPEC)
    expected = other.weighted_loss.gradients([type(inputs)(
        obs=inputs.obs, actions=inputs.actions, returns=inputs.returns, advantages=want,
        weights=inputs.weights)])
    for n in got:
        np.testing.assert_allclose(got[n], float(np.float32(cfg.learning_rate)) * expected[n],
                                   rtol=1e-9,
                                   atol=1e-14, err_msg=n)
    for n, value in agent.value_net.get_weights().items():
        np.testing.assert_allclose(value, stepped[n], rtol=1e-12, atol=1e-15, err_msg=n)
    assert metrics["value_applied"] and metrics["value_loss_after_fit"] < metrics["value_loss"]
    agent.close()
    other.close()


@pytest.mark.parametrize("impl", IMPLS)
def test_checkpoint_holds_the_value_net_and_resumes_bit_for_bit(impl, tmp_path):
    cfg = config(optimizer="adam")
    agent = agent_class(impl)(SPEC, cfg, seed=2)
    agent.update(batch())
    path = agent.save(str(tmp_path / "ck"))
    resumed = agent_class(impl)(SPEC, cfg, seed=5)
    resumed.restore(path)
    for a in (agent, resumed):
        a.update(batch())
    for part in ("get_weights",):
        a, r = getattr(agent, part)(), getattr(resumed, part)()
        assert all(np.array_equal(a[n], r[n]) for n in a)
    a, r = agent.value_net.get_weights(), resumed.value_net.get_weights()
    assert all(np.array_equal(a[n], r[n]) for n in a)  # Adam's state came back too
    plain = agent_class(impl)(SPEC, cfg.replace(baseline="none"), seed=2)
    with pytest.raises(IncompatibleCheckpointError,
                       match=re.escape("value/head/kernel: in the checkpoint (3, 1) float64, "
                                       "not in the agent")):
        plain.restore(path)
    for x in (agent, resumed, plain):
        x.close()


@pytest.mark.slow
@pytest.mark.parametrize("impl", IMPLS)
def test_pgtwin_train_with_the_value_baseline_resumes_bit_for_bit(impl, tmp_path, capsys):
    # 4 updates of 4 x 32 steps, checkpoint every 2: stopped at 256 env steps and resumed
    # to 512, against one uninterrupted 512-step run. Policy and value weights must be the
    # same bits (weights.npz holds the policy; the value net is compared from the last
    # checkpoint of each run, restored into a fresh agent).
    from pgtwin.cli import main

    common = ["train", "--env", "CartPole-v1", "--impl", impl, "--num-envs", "4",
              "--num-steps", "32", "--hidden", "8", "--baseline", "value", "--gpomdp",
              "--value-fit-steps", "3", "--checkpoint-every", "2", "--deterministic",
              "--no-xla", "--json", "--no-tensorboard"]  # the subject is the resume, not XLA
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(common + ["--steps", "512", "--logdir", str(whole)]) == 0
    assert main(common + ["--steps", "256", "--logdir", str(part)]) == 0
    assert main(common + ["--steps", "512", "--logdir", str(part), "--resume"]) == 0
    capsys.readouterr()
    a, b = np.load(whole / "weights.npz"), np.load(part / "weights.npz")
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    newest = lambda d: sorted((d / "checkpoints").iterdir())[-1] / "agent" / "ckpt"  # noqa: E731
    spec = PolicySpec("categorical", (4,), 2, hidden=(8,))
    cfg = ReinforceConfig(baseline="value", gpomdp=True, value_fit_steps=3, value_horizon=500,
                          num_envs=4, num_steps=32, gamma=0.97, learning_rate=2.5e-2)
    nets = []
    for run in (whole, part):
        agent = agent_class(impl)(spec, cfg)
        agent.restore(str(newest(run)))
        nets.append(agent.value_net.get_weights())
        agent.close()
    for name in nets[0]:
        np.testing.assert_array_equal(nets[0][name], nets[1][name], err_msg=name)
