"""examples/: the TF1 script and its TF2 migration agree on every rung; the wrong ones are caught.

The batch is a real CartPole rollout (random actions) with the examples' own discounted,
standardised returns, and the weights a seeded Glorot draw, so the comparison sees the
gradients a user would.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from examples import tf1_reinforce as old
from examples import tf2_reinforce as new
from examples import tf2_reinforce_wrong as wrong
from pgtwin.parity import assert_parity, compare


def tf1_weights(seed=0):
    """Glorot-uniform kernels and small random biases under the TF1 script's names."""
    rng = np.random.default_rng(seed)
    weights = {}
    for layer, (n_in, n_out) in {"fc1": (4, 64), "fc2": (64, 64), "logits": (64, 2)}.items():
        limit = np.sqrt(6.0 / (n_in + n_out))
        weights[f"actor/{layer}/W"] = rng.uniform(-limit, limit, (n_in, n_out))
        weights[f"actor/{layer}/b"] = rng.normal(0.0, 0.1, n_out)
    return weights


@pytest.fixture(scope="module")
def batch():
    """One CartPole episode with uniformly random actions, as the scripts feed it."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=1)
    states, actions, rewards = [], [], []
    done = False
    while not done:
        action = int(rng.integers(2))
        states.append(obs)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        done = terminated or truncated
    env.close()
    return {"obs": np.array(states, np.float32), "actions": np.array(actions, np.int32),
            "returns": old.discounted_returns(rewards)}


def test_the_migration_passes_with_its_own_optimizers_in_float32(batch):
    report = assert_parity(old.build_loss, new.loss_fn, tf1_weights(), batch, steps=3,
                           optimizer=(old.make_optimizer, new.make_optimizer),
                           name_map=new.NAME_MAP, dtype="float32")
    assert len([r for r in report.rows if r.rung == "gradients"]) == 6


def test_the_migration_passes_exactly_in_float64_with_matched_optimizers(batch):
    report = assert_parity(old.build_loss, new.loss_fn, tf1_weights(), batch, steps=3,
                           optimizer=("adam", {"learning_rate": old.LEARNING_RATE}),
                           name_map=new.NAME_MAP, dtype="float64")
    numeric = [r for r in report.rows if not r.item.startswith("optimizer")]
    assert max(r.max_abs for r in numeric) == 0.0


def test_numpy_log_probs_are_caught_at_the_gradients_rung(batch):
    report = compare(old.build_loss, wrong.loss_fn_numpy_log_probs, tf1_weights(), batch,
                     optimizer=(old.make_optimizer, new.make_optimizer), name_map=new.NAME_MAP)
    first = report.first_failure
    assert (first.rung, first.item) == ("gradients", "actor/fc1/W")
    assert "DisconnectedGradientError" in first.note
    assert all(r.ok for r in report.rows if r.rung in ("variables", "outputs", "loss"))
    assert sorted(r.item for r in report.rows if r.rung == "gradients" and not r.ok) == \
        sorted(new.NAME_MAP)


def test_keras_default_epsilon_is_caught_at_the_weights_rung(batch):
    report = compare(old.build_loss, new.loss_fn, tf1_weights(), batch,
                     optimizer=(old.make_optimizer, wrong.make_optimizer_default_epsilon),
                     name_map=new.NAME_MAP, dtype="float32")
    first = report.first_failure
    assert (first.rung, first.item) == ("weights", "optimizer.epsilon")
    # The weights themselves part too, past the float32 tolerance, where gradients are small.
    assert any(not r.ok for r in report.rows
               if r.rung == "weights" and not r.item.startswith("optimizer"))


def test_the_tf2_script_trains_and_checkpoints(tmp_path):
    new.main(["--iterations", "2", "--save", str(tmp_path / "ckpt")])
    trainer = new.Trainer(seed=5)
    trainer.checkpoint.read(str(tmp_path / "ckpt")).assert_consumed()
    assert int(trainer.optimizer.iterations.numpy()) == 2
