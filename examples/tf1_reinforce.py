"""REINFORCE on CartPole as TF1 code was written: placeholders, feed_dict, one Session.

This is the *old* code a user arrives with (the starting point of docs/migration.md), kept
runnable under TensorFlow 2 through ``tf.compat.v1``. Its own variable names
(``actor/fc1/W`` ...), its own loss, ``tf.compat.v1.train.AdamOptimizer`` with TF1's
default epsilon (1e-8), a ``Saver`` checkpoint.

Run it::

    python examples/tf1_reinforce.py --iterations 20 --save /tmp/tf1_reinforce/model

The graph is built in its own ``tf.Graph`` (old scripts called
``tf.compat.v1.disable_eager_execution()`` instead, which would switch eager mode off for
the whole process, the harness and the TF2 code included).

``build_loss`` is the piece ``pgtwin.parity.compare`` drives: it only needs the
placeholders, so the harness can build it in a graph of its own.
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

OBS_DIM = 4
NUM_ACTIONS = 2
HIDDEN = 64
LEARNING_RATE = 1e-2
GAMMA = 0.99


def fully_connected(x, scope, units, activation=None):
    """``activation(x @ W + b)`` with ``scope/W`` and ``scope/b``, in ``x``'s dtype."""
    with tf1.variable_scope(scope):
        W = tf1.get_variable("W", [x.shape[1], units], dtype=x.dtype,
                             initializer=tf1.glorot_uniform_initializer())
        b = tf1.get_variable("b", [units], dtype=x.dtype, initializer=tf1.zeros_initializer())
        y = tf.matmul(x, W) + b
        return activation(y) if activation else y


def build_policy(obs):
    """Logits ``[B, NUM_ACTIONS]`` from observations ``[B, OBS_DIM]``."""
    with tf1.variable_scope("actor"):
        h = fully_connected(obs, "fc1", HIDDEN, tf.tanh)
        h = fully_connected(h, "fc2", HIDDEN, tf.tanh)
        return fully_connected(h, "logits", NUM_ACTIONS)


def build_loss(ph):
    """The REINFORCE loss from placeholders ``obs [B, 4]``, ``actions [B]`` int, ``returns [B]``.

    Returns ``{"loss", "logits", "log_probs"}`` (the extra entries are what
    ``pgtwin.parity.compare`` checks at its outputs rung).
    """
    logits = build_policy(ph["obs"])
    onehot = tf.one_hot(ph["actions"], NUM_ACTIONS, dtype=logits.dtype)
    log_probs = tf.reduce_sum(onehot * tf.nn.log_softmax(logits), axis=1)
    loss = -tf.reduce_mean(log_probs * ph["returns"])
    return {"loss": loss, "logits": logits, "log_probs": log_probs}


def make_optimizer():
    """TF1's Adam: epsilon defaults to 1e-8 here (Keras: 1e-7)."""
    return tf1.train.AdamOptimizer(LEARNING_RATE)


def discounted_returns(rewards, gamma=GAMMA):
    """``G_t = r_t + gamma G_{t+1}`` over one episode, then standardised."""
    returns = np.zeros(len(rewards), dtype=np.float32)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return (returns - returns.mean()) / (returns.std() + 1e-8)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="Saver checkpoint prefix to write at the end")
    args = parser.parse_args(argv)

    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(args.seed)
        obs_ph = tf1.placeholder(tf.float32, [None, OBS_DIM], name="obs")
        actions_ph = tf1.placeholder(tf.int32, [None], name="actions")
        returns_ph = tf1.placeholder(tf.float32, [None], name="returns")
        out = build_loss({"obs": obs_ph, "actions": actions_ph, "returns": returns_ph})
        probs = tf.nn.softmax(out["logits"])
        train_op = make_optimizer().minimize(out["loss"])
        saver = tf1.train.Saver()
        init = tf1.global_variables_initializer()

    rng = np.random.default_rng(args.seed)
    env = gym.make("CartPole-v1")
    with tf1.Session(graph=graph) as sess:
        sess.run(init)
        for it in range(args.iterations):
            obs, _ = env.reset(seed=args.seed + it)
            states, actions, rewards = [], [], []
            done = False
            while not done:
                p = sess.run(probs, feed_dict={obs_ph: obs[None]})[0]
                action = rng.choice(NUM_ACTIONS, p=p / p.sum())
                states.append(obs)
                actions.append(action)
                obs, reward, terminated, truncated, _ = env.step(action)
                rewards.append(reward)
                done = terminated or truncated
            # Re-feed the whole episode: the forward pass seed 000 wanted to skip. Skipping
            # it by storing numpy log-probs cuts the loss off the weights (see
            # tf2_reinforce_wrong.py); this recompute is what makes the gradient exist.
            loss, _ = sess.run([out["loss"], train_op], feed_dict={
                obs_ph: np.array(states, np.float32), actions_ph: actions,
                returns_ph: discounted_returns(rewards)})
            if it % 10 == 0:
                print(f"iteration {it}: episode return {sum(rewards):.0f}, loss {loss:.4f}")
        if args.save:
            print("saved", saver.save(sess, args.save))
    env.close()


if __name__ == "__main__":
    main()
