"""Policy gradient with an entropy bonus, as a TF1 notebook exported to a script.

The graph is built at top level, cell after cell, with ``tf.contrib.layers``-style code
moved to ``tf_slim`` (``slim.stack`` of ``slim.fully_connected``: variables
``fc/fc_1/weights``, ``fc/fc_1/biases``, ..., ``logits/weights``), 0-d placeholders
(``entropy_coef``, shape ``[]``), a ``global_step`` made by hand and found again through
``tf.train.get_global_step()``, and ``AdamOptimizer(...).minimize(loss, global_step=...)``.
The only TF 2.x edits: ``import tensorflow.compat.v1 as tf`` and ``import tf_slim as slim``
(was ``slim = tf.contrib.slim``).

It builds into the default graph. ``TF1Program.from_script`` runs it inside the harness's
graph (``__name__ == "__pgtwin__"``), where the training loop at the bottom does not run; as
a script it first gives itself a graph with TF1's variables (see the first cell)::

    python examples/tf1_notebook/tf1_notebook.py
"""
# In[1]:

import numpy as np
import gymnasium as gym
import tensorflow.compat.v1 as tf
import tf_slim as slim

if __name__ == "__main__":
    # Under TF 2.x eager is on at import. Old notebooks called tf.disable_v2_behavior(),
    # which switches eager off for the whole process; entering a graph of our own is enough.
    # Ref variables, as TF1 had: get_global_step() wants an integer "global_step:0".
    # (Kept in a global, and left at the end of the last cell: a dropped one is collected.)
    _graph_context = tf.Graph().as_default()
    _graph_context.__enter__()
    tf.disable_resource_variables()

# In[2]:

OBS_DIM = 4
N_ACTIONS = 2
HIDDEN = [64, 64]
LEARNING_RATE = 1e-3
GAMMA = 0.99
ENTROPY_COEF = 0.01
N_ITERATIONS = 100
STEPS_PER_BATCH = 1000

tf.set_random_seed(0)

# In[3]:

obs = tf.placeholder(tf.float32, [None, OBS_DIM], name="obs")
actions = tf.placeholder(tf.int32, [None], name="actions")
returns = tf.placeholder(tf.float32, [None], name="returns")
entropy_coef = tf.placeholder(tf.float32, [], name="entropy_coef")

with slim.arg_scope([slim.fully_connected], activation_fn=tf.nn.tanh):
    net = slim.stack(obs, slim.fully_connected, HIDDEN, scope="fc")
    logits = slim.fully_connected(net, N_ACTIONS, activation_fn=None, scope="logits")

probs = tf.nn.softmax(logits)
sample_action = tf.squeeze(tf.multinomial(logits, 1), axis=1)

# In[4]:

neg_log_prob = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
pg_loss = tf.reduce_mean(neg_log_prob * returns)
entropy = tf.reduce_mean(-tf.reduce_sum(probs * tf.nn.log_softmax(logits), axis=1))
loss = pg_loss - entropy_coef * entropy

global_step = tf.Variable(0, name="global_step", trainable=False)
optimizer = tf.train.AdamOptimizer(LEARNING_RATE)
train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())

# In[5]:

sess = tf.Session()
sess.run(tf.global_variables_initializer())

# In[6]:


def discount(rewards, dones, gamma=GAMMA):
    out = np.zeros(len(rewards))
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        out[t] = running
    return out


# In[7]:

if __name__ == "__main__":
    env = gym.make("CartPole-v1")
    ob, _ = env.reset(seed=0)
    ep_return, ep_returns = 0.0, []
    for it in range(N_ITERATIONS):
        batch_obs, batch_acts, batch_rews, batch_dones = [], [], [], []
        for _ in range(STEPS_PER_BATCH):
            a = sess.run(sample_action, {obs: ob[None]})[0]
            batch_obs.append(ob)
            batch_acts.append(a)
            ob, r, term, trunc, _ = env.step(a)
            batch_rews.append(r)
            batch_dones.append(float(term or trunc))
            ep_return += r
            if term or trunc:
                ep_returns.append(ep_return)
                ep_return = 0.0
                ob, _ = env.reset()
        batch_dones[-1] = 1.0
        rets = discount(batch_rews, batch_dones)
        rets = (rets - rets.mean()) / (rets.std() + 1e-8)
        l, _, step = sess.run([loss, train_op, global_step], {
            obs: np.array(batch_obs), actions: np.array(batch_acts), returns: rets,
            entropy_coef: ENTROPY_COEF})
        if it % 10 == 0:
            print("step", step, "loss %.4f" % l, "mean return %.1f" % np.mean(ep_returns[-20:]))
    sess.close()
    _graph_context.__exit__(None, None, None)
