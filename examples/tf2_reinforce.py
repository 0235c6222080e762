"""The TF2 migration of ``tf1_reinforce.py``: tf.Variables, GradientTape, tf.function, Keras Adam.

Piece by piece (docs/migration.md has the table):

* placeholders + ``feed_dict`` -> arguments of ``loss_fn`` / ``train_step``;
* ``get_variable`` under ``variable_scope`` -> ``tf.Variable``\\ s held by a ``tf.Module``
  under new names (``fc1/kernel`` ...; ``NAME_MAP`` says which old name became which);
* ``tf.gradients`` / ``optimizer.minimize`` -> ``GradientTape`` + ``apply_gradients``;
* ``Session.run`` -> a ``tf.function`` with an input signature (a dynamic batch, so one
  trace serves every episode length);
* ``AdamOptimizer(lr)`` -> ``keras.optimizers.Adam(lr, epsilon=1e-8)``: Keras' default
  epsilon is 1e-7, so TF1's 1e-8 is written out;
* ``Saver`` -> ``tf.train.Checkpoint``.

Run it::

    python examples/tf2_reinforce.py --iterations 20

``loss_fn(variables, inputs)`` is what ``pgtwin.parity.compare`` checks against
``tf1_reinforce.build_loss`` (tests/test_examples.py).
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

OBS_DIM = 4
NUM_ACTIONS = 2
HIDDEN = 64
LEARNING_RATE = 1e-2
GAMMA = 0.99

#: Old (TF1) variable name -> new (TF2) name.
NAME_MAP = {
    "actor/fc1/W": "fc1/kernel", "actor/fc1/b": "fc1/bias",
    "actor/fc2/W": "fc2/kernel", "actor/fc2/b": "fc2/bias",
    "actor/logits/W": "logits/kernel", "actor/logits/b": "logits/bias",
}


class Actor(tf.Module):
    """The policy's variables by name (Glorot-uniform kernels, zero biases)."""

    def __init__(self, seed: int = 0, dtype: tf.DType = tf.float32):
        super().__init__(name="actor")
        init = keras.initializers.GlorotUniform(seed=seed)
        sizes = {"fc1": (OBS_DIM, HIDDEN), "fc2": (HIDDEN, HIDDEN), "logits": (HIDDEN, NUM_ACTIONS)}
        self.variables_by_name = {}
        for layer, (n_in, n_out) in sizes.items():
            self.variables_by_name[f"{layer}/kernel"] = tf.Variable(
                init((n_in, n_out), dtype=dtype), name=f"{layer}/kernel")
            self.variables_by_name[f"{layer}/bias"] = tf.Variable(
                tf.zeros([n_out], dtype), name=f"{layer}/bias")


def policy_logits(variables, obs):
    """Logits ``[B, NUM_ACTIONS]`` from observations ``[B, OBS_DIM]`` (gradient to variables)."""
    h = tf.tanh(obs @ variables["fc1/kernel"] + variables["fc1/bias"])
    h = tf.tanh(h @ variables["fc2/kernel"] + variables["fc2/bias"])
    return h @ variables["logits/kernel"] + variables["logits/bias"]


def loss_fn(variables, inputs):
    """The REINFORCE loss on ``obs [B, 4]``, ``actions [B]`` int, ``returns [B]`` (data).

    The log-probs are recomputed from the observations under the tape, so the loss reaches
    every variable. Returns ``{"loss", "logits", "log_probs"}`` like ``build_loss``.
    """
    logits = policy_logits(variables, inputs["obs"])
    onehot = tf.one_hot(inputs["actions"], NUM_ACTIONS, dtype=logits.dtype)
    log_probs = tf.reduce_sum(onehot * tf.nn.log_softmax(logits), axis=1)
    loss = -tf.reduce_mean(log_probs * inputs["returns"])
    return {"loss": loss, "logits": logits, "log_probs": log_probs}


def make_optimizer():
    """Keras Adam with TF1's epsilon written out (Keras' default would be 1e-7)."""
    return keras.optimizers.Adam(learning_rate=LEARNING_RATE, epsilon=1e-8)


def discounted_returns(rewards, gamma=GAMMA):
    """``G_t = r_t + gamma G_{t+1}`` over one episode, then standardised."""
    returns = np.zeros(len(rewards), dtype=np.float32)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return (returns - returns.mean()) / (returns.std() + 1e-8)


class Trainer:
    """The actor, its optimizer and the two ``tf.function``\\ s that replace ``Session.run``."""

    def __init__(self, seed: int = 0):
        self.actor = Actor(seed)
        self.variables = self.actor.variables_by_name
        self.optimizer = make_optimizer()
        self.optimizer.build(list(self.variables.values()))  # its slots exist before tracing
        self.checkpoint = tf.train.Checkpoint(actor=self.actor, optimizer=self.optimizer)

    @tf.function(input_signature=[tf.TensorSpec([None, OBS_DIM], tf.float32)])
    def probs(self, obs):
        return tf.nn.softmax(policy_logits(self.variables, obs))

    @tf.function(input_signature=[tf.TensorSpec([None, OBS_DIM], tf.float32),
                                  tf.TensorSpec([None], tf.int32),
                                  tf.TensorSpec([None], tf.float32)])
    def train_step(self, obs, actions, returns):
        with tf.GradientTape() as tape:
            loss = loss_fn(self.variables, {"obs": obs, "actions": actions, "returns": returns})["loss"]
        variables = list(self.variables.values())
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="tf.train.Checkpoint prefix to write at the end")
    args = parser.parse_args(argv)

    trainer = Trainer(args.seed)
    rng = np.random.default_rng(args.seed)
    env = gym.make("CartPole-v1")
    for it in range(args.iterations):
        obs, _ = env.reset(seed=args.seed + it)
        states, actions, rewards = [], [], []
        done = False
        while not done:
            p = trainer.probs(obs[None].astype(np.float32)).numpy()[0]
            action = rng.choice(NUM_ACTIONS, p=p / p.sum())
            states.append(obs)
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            done = terminated or truncated
        loss = trainer.train_step(np.array(states, np.float32), np.array(actions, np.int32),
                                  discounted_returns(rewards))
        if it % 10 == 0:
            print(f"iteration {it}: episode return {sum(rewards):.0f}, loss {float(loss):.4f}")
    if args.save:
        print("saved", trainer.checkpoint.write(args.save))
    env.close()


if __name__ == "__main__":
    main()
