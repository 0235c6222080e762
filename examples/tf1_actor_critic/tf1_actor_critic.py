"""A2C on CartPole in TF1: actor and critic in one graph, one Session, two losses, two optimizers.

The layout of TF1 actor-critic code: a small ``fc`` helper over ``get_variable`` with
orthogonal initialisers (gain sqrt(2) for hidden layers, 0.01 for the policy head), the actor
under ``actor/`` and the critic under ``critic/`` (``actor/h1/w``, ``critic/v/b``, ...),
advantages fed through a placeholder (computed in numpy from the critic's values), the
actor's loss with an entropy bonus, the critic's squared error, ``AdamOptimizer``\\ s over
each one's ``var_list`` and a grouped ``train_op``. The only TF 2.x edit is
``import tensorflow.compat.v1 as tf``.

Only the actor is migrated (``tf2_actor.py``): the critic's variables are in neither the
actor's loss nor its ``train_op``. Run it::

    python -m examples.tf1_actor_critic.tf1_actor_critic --updates 200
"""
import argparse

import gymnasium as gym
import numpy as np
import tensorflow.compat.v1 as tf


def fc(x, scope, nh, init_scale=1.0, init_bias=0.0):
    with tf.variable_scope(scope):
        nin = x.get_shape().as_list()[1]
        w = tf.get_variable("w", [nin, nh], dtype=x.dtype,
                            initializer=tf.orthogonal_initializer(init_scale))
        b = tf.get_variable("b", [nh], dtype=x.dtype,
                            initializer=tf.constant_initializer(init_bias))
        return tf.matmul(x, w) + b


def entropy_of(logits):
    """H(softmax(logits)) per row, [B]."""
    return -tf.reduce_sum(tf.nn.softmax(logits) * tf.nn.log_softmax(logits), axis=1)


class ActorCritic(object):
    def __init__(self, obs_dim, n_actions, hidden=64, actor_lr=7e-4, critic_lr=1e-3,
                 ent_coef=0.01, seed=0, dtype=tf.float32):
        tf.set_random_seed(seed)
        self.obs = tf.placeholder(dtype, [None, obs_dim], name="obs")
        self.actions = tf.placeholder(tf.int32, [None], name="actions")
        self.advantages = tf.placeholder(dtype, [None], name="advantages")
        self.returns = tf.placeholder(dtype, [None], name="returns")

        with tf.variable_scope("actor"):
            h = tf.tanh(fc(self.obs, "h1", hidden, init_scale=np.sqrt(2)))
            h = tf.tanh(fc(h, "h2", hidden, init_scale=np.sqrt(2)))
            self.logits = fc(h, "pi", n_actions, init_scale=0.01)
        with tf.variable_scope("critic"):
            h = tf.tanh(fc(self.obs, "h1", hidden, init_scale=np.sqrt(2)))
            h = tf.tanh(fc(h, "h2", hidden, init_scale=np.sqrt(2)))
            self.value = fc(h, "v", 1)[:, 0]

        self.sample = tf.squeeze(tf.random.categorical(self.logits, 1), axis=1)

        neglogp = tf.nn.sparse_softmax_cross_entropy_with_logits(
            logits=self.logits, labels=self.actions)
        self.pg_loss = tf.reduce_mean(self.advantages * neglogp)
        self.entropy = tf.reduce_mean(entropy_of(self.logits))
        self.actor_loss = self.pg_loss - ent_coef * self.entropy
        self.critic_loss = tf.reduce_mean(tf.square(self.returns - self.value))

        actor_params = tf.trainable_variables("actor")
        critic_params = tf.trainable_variables("critic")
        self.actor_train_op = tf.train.AdamOptimizer(actor_lr, epsilon=1e-5).minimize(
            self.actor_loss, var_list=actor_params)
        self.critic_train_op = tf.train.AdamOptimizer(critic_lr).minimize(
            self.critic_loss, var_list=critic_params)
        self.train_op = tf.group(self.actor_train_op, self.critic_train_op)

        self.sess = tf.Session()
        self.sess.run(tf.global_variables_initializer())

    def step(self, ob):
        a, v = self.sess.run([self.sample, self.value], {self.obs: ob[None]})
        return a[0], v[0]

    def train(self, obs, actions, returns, values):
        advs = returns - values
        advs = (advs - advs.mean()) / (advs.std() + 1e-8)
        pg, vf, ent, _ = self.sess.run(
            [self.pg_loss, self.critic_loss, self.entropy, self.train_op],
            {self.obs: obs, self.actions: actions, self.advantages: advs,
             self.returns: returns})
        return pg, vf, ent


def main(argv=None):
    parser = argparse.ArgumentParser(description="A2C on CartPole, TF1 actor and critic")
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--nsteps", type=int, default=32)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    env = gym.make("CartPole-v1")
    with tf.Graph().as_default():
        model = ActorCritic(env.observation_space.shape[0], env.action_space.n, seed=args.seed)
        ob, _ = env.reset(seed=args.seed)
        ep_ret, ep_rets = 0.0, []
        for update in range(args.updates):
            mb_obs, mb_acts, mb_rews, mb_vals, mb_dones = [], [], [], [], []
            for _ in range(args.nsteps):
                a, v = model.step(ob)
                mb_obs.append(ob)
                mb_acts.append(a)
                mb_vals.append(v)
                ob, r, term, trunc, _ = env.step(a)
                mb_rews.append(r)
                mb_dones.append(term)
                ep_ret += r
                if term or trunc:
                    ep_rets.append(ep_ret)
                    ep_ret = 0.0
                    ob, _ = env.reset()
            # n-step returns, bootstrapped from the critic at the last observation
            _, last_v = model.step(ob)
            mb_rets = np.zeros(args.nsteps)
            running = last_v
            for t in reversed(range(args.nsteps)):
                running = mb_rews[t] + args.gamma * running * (1.0 - mb_dones[t])
                mb_rets[t] = running
            pg, vf, ent = model.train(np.asarray(mb_obs), np.asarray(mb_acts), mb_rets,
                                      np.asarray(mb_vals))
            if update % 50 == 0 and ep_rets:
                print("update %d: mean return %.1f, pg %.3f, vf %.3f, entropy %.3f"
                      % (update, np.mean(ep_rets[-20:]), pg, vf, ent))
        model.sess.close()
    env.close()


if __name__ == "__main__":
    main()
