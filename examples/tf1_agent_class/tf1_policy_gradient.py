"""REINFORCE on CartPole as a TF1 agent class: everything is built in ``__init__``.

The shape of countless TF1 tutorials: the constructor makes the placeholders, a dense policy
from ``tf.compat.v1.get_variable`` under ``variable_scope`` (``policy/fc1/weights``,
``policy/fc1/biases``, ..., ``policy/logits/weights``), the loss in a local variable kept as
``self.loss``, ``AdamOptimizer(lr).minimize(loss)`` and its own ``Session``, then runs the
initializer. Only the ``tf.compat.v1.`` prefixes were added for TF 2.x.

It builds into whatever graph is the default one and never switches eager execution off, so
it runs inside the parity harness's graph unchanged; ``main()`` gives it a graph of its own::

    python -m examples.tf1_agent_class.tf1_policy_gradient --episodes 50
"""
import argparse

import gymnasium as gym
import numpy as np
import tensorflow as tf


class PolicyGradient(object):
    """A softmax policy over ``n_actions`` trained by REINFORCE on whole episodes.

    Placeholders: ``obs_ph`` [None, obs_dim] (``dtype``), ``act_ph`` int32 [None],
    ``ret_ph`` [None] (``dtype``, the standardised discounted returns).
    Tensors: ``logits`` [None, n_actions], ``all_act_prob``, ``loss`` (scalar),
    ``train_op``. Weights are truncated-normal (stddev 0.1), biases 0.1.
    """

    def __init__(self, obs_dim, n_actions, lr=0.01, hidden=(32, 32), seed=0, gamma=0.99,
                 dtype=tf.float32):
        self.obs_dim = obs_dim
        self.n_actions = n_actions
        self.lr = lr
        self.gamma = gamma
        self.ep_obs, self.ep_as, self.ep_rs = [], [], []

        tf.compat.v1.set_random_seed(seed)

        with tf.compat.v1.name_scope("inputs"):
            self.obs_ph = tf.compat.v1.placeholder(dtype, [None, obs_dim], name="observations")
            self.act_ph = tf.compat.v1.placeholder(tf.int32, [None], name="actions_num")
            self.ret_ph = tf.compat.v1.placeholder(dtype, [None], name="actions_value")

        with tf.compat.v1.variable_scope("policy"):
            layer = self.obs_ph
            for i, units in enumerate(hidden):
                layer = self._dense(layer, units, "fc%d" % (i + 1), tf.nn.relu)
            self.logits = self._dense(layer, n_actions, "logits")

        self.all_act_prob = tf.nn.softmax(self.logits, name="act_prob")

        with tf.compat.v1.name_scope("loss"):
            # -log pi(a|s), weighted by the return that followed
            neg_log_prob = tf.nn.sparse_softmax_cross_entropy_with_logits(
                logits=self.logits, labels=self.act_ph)
            loss = tf.reduce_mean(neg_log_prob * self.ret_ph)
        self.loss = loss

        with tf.compat.v1.name_scope("train"):
            opt = tf.compat.v1.train.AdamOptimizer(lr)
            self.train_op = opt.minimize(loss)

        self.sess = tf.compat.v1.Session()
        self.sess.run(tf.compat.v1.global_variables_initializer())

    def _dense(self, x, units, name, activation=None):
        with tf.compat.v1.variable_scope(name):
            w = tf.compat.v1.get_variable(
                "weights", [x.shape[1], units], dtype=x.dtype,
                initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.1))
            b = tf.compat.v1.get_variable(
                "biases", [units], dtype=x.dtype,
                initializer=tf.compat.v1.constant_initializer(0.1))
            out = tf.matmul(x, w) + b
        if activation is not None:
            out = activation(out)
        return out

    def choose_action(self, observation):
        prob = self.sess.run(self.all_act_prob, feed_dict={self.obs_ph: observation[np.newaxis, :]})
        prob = prob.ravel().astype(np.float64)
        return np.random.choice(range(prob.shape[0]), p=prob / prob.sum())

    def store_transition(self, s, a, r):
        self.ep_obs.append(s)
        self.ep_as.append(a)
        self.ep_rs.append(r)

    def learn(self):
        discounted_ep_rs_norm = self._discount_and_norm_rewards()
        loss, _ = self.sess.run([self.loss, self.train_op], feed_dict={
            self.obs_ph: np.vstack(self.ep_obs),
            self.act_ph: np.array(self.ep_as),
            self.ret_ph: discounted_ep_rs_norm,
        })
        self.ep_obs, self.ep_as, self.ep_rs = [], [], []
        return loss

    def _discount_and_norm_rewards(self):
        discounted_ep_rs = np.zeros_like(self.ep_rs, dtype=np.float64)
        running_add = 0
        for t in reversed(range(0, len(self.ep_rs))):
            running_add = running_add * self.gamma + self.ep_rs[t]
            discounted_ep_rs[t] = running_add
        discounted_ep_rs -= np.mean(discounted_ep_rs)
        discounted_ep_rs /= np.std(discounted_ep_rs) + 1e-8
        return discounted_ep_rs


def main(argv=None):
    parser = argparse.ArgumentParser(description="REINFORCE on CartPole, TF1 agent class")
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    np.random.seed(args.seed)
    env = gym.make("CartPole-v1")
    with tf.Graph().as_default():
        agent = PolicyGradient(env.observation_space.shape[0], env.action_space.n,
                               seed=args.seed)
        for episode in range(args.episodes):
            observation, _ = env.reset(seed=args.seed + episode)
            done = False
            while not done:
                action = agent.choose_action(observation)
                next_observation, reward, terminated, truncated, _ = env.step(action)
                agent.store_transition(observation, action, reward)
                observation = next_observation
                done = terminated or truncated
            ep_return = sum(agent.ep_rs)
            loss = agent.learn()
            if episode % 10 == 0:
                print("episode %d: return %.0f, loss %.4f" % (episode, ep_return, loss))
        agent.sess.close()
    env.close()


if __name__ == "__main__":
    main()
