"""Counting each side's layer activations for the outputs rung's hint
(pgtwin.parity.layer_hints), against counts made by hand."""
from __future__ import annotations

from collections import Counter

import keras
import tensorflow as tf

from pgtwin.parity.layer_hints import activation_hint, keras_activations, tf1_activations

tf1 = tf.compat.v1


def test_a_network_called_twice_counts_its_layers_once_and_squashing_is_not_a_layer():
    # relu(x @ w1 + b1) @ w2 twice (SAC's actor on two batches), then tanh of the sum of
    # the two outputs and a softplus of it: one relu layer (w1), no tanh or softplus layer.
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        w1 = tf1.get_variable("w1", [3, 4])
        b1 = tf1.get_variable("b1", [4])
        w2 = tf1.get_variable("w2", [4, 2])

        def actor(x):
            return tf.nn.relu(tf.matmul(x, w1) + b1) @ w2

        a, b = actor(tf.ones([5, 3])), actor(tf.zeros([5, 3]))
        squashed = tf.tanh(a + b)
        loss = tf.reduce_sum(squashed + tf.nn.softplus(-2.0 * squashed))
        assert tf1_activations(loss) == Counter({"relu": 1})


def test_an_activation_after_a_layers_batch_norm_is_the_layers():
    # relu(bn(x @ w1)) with tf.nn.batch_normalization (x * inv + (beta - mean * inv), inv from
    # an Rsqrt) and elu(FusedBatchNorm(conv2d(img, w2))): one relu and one elu layer. Before, an
    # activation after a batch norm was no layer's, and a faithful port's Keras ReLU layer
    # read as an activation TF1 lacks.
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        w1 = tf1.get_variable("w1", [3, 4])
        w2 = tf1.get_variable("w2", [1, 1, 4, 4])
        h = tf.matmul(tf.ones([5, 3]), w1)
        mean, var = tf.nn.moments(h, axes=[0])
        h = tf.nn.relu(tf.nn.batch_normalization(h, mean, var, tf.zeros([4]), tf.ones([4]),
                                                 1e-3))
        img = tf.reshape(h, [1, 1, 5, 4])
        y, _, _ = tf1.nn.fused_batch_norm(tf.nn.conv2d(img, w2, 1, "SAME"), tf.ones([4]),
                                          tf.zeros([4]))
        assert tf1_activations(tf.reduce_sum(tf.nn.elu(y))) == Counter({"relu": 1, "elu": 1})


def test_a_dense_layer_on_a_sequence_counts_its_activation_through_tensordots_reshape():
    # tf.compat.v1.layers.dense on [B, T, F] is tensordot: MatMul, Reshape back to 3-D, then
    # BiasAdd and relu (and a tanh layer added by hand, x @ w + b through the same Reshape).
    # Before, the Reshape hid the MatMul and no activation was counted: a helper's faithful
    # recurrent port was told to take relu off its Keras layers.
    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf1.placeholder(tf.float32, [None, None, 3])
        w1, b1 = tf1.get_variable("w1", [3, 4]), tf1.get_variable("b1", [4])
        w2, b2 = tf1.get_variable("w2", [4, 2]), tf1.get_variable("b2", [2])
        h = tf.nn.relu(tf.nn.bias_add(tf.tensordot(x, w1, axes=1), b1))
        y = tf.tanh(tf.tensordot(h, w2, axes=1) + b2)
        assert tf1_activations(tf.reduce_sum(y)) == Counter({"relu": 1, "tanh": 1})


def test_keras_layers_count_those_holding_compared_variables_and_a_missing_one_is_named():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2, activation="tanh"), keras.layers.ReLU()])
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu")])
    compared = {id(v.value) for v in model.trainable_variables}
    counted = keras_activations([*model.layers, *other.layers], compared)
    assert counted == Counter({"relu": 2, "tanh": 1})  # Dense relu, ReLU(); not `other`
    assert activation_hint(Counter({"relu": 2, "tanh": 1}), counted) == ""
    assert activation_hint(Counter({"tanh": 1}), Counter()).startswith(
        "the activations differ: TF1's loss is computed through tanh x1, the Keras layers "
        "apply none")
    # the fix names the activation TF1 has and Keras lacks, and the one only Keras applies
    note = activation_hint(Counter({"tanh": 2}), Counter({"tanh": 1, "relu": 1}))
    assert note.endswith("give each layer its TF1 activation (Dense(..., activation='tanh')); "
                         "take relu off the Keras layers TF1 leaves linear "
                         "(activation=None)"), note


def test_outputs_one_factor_apart_are_named_with_the_factor():
    # an Atari port that forgot obs / 255, biases zero and ReLUs positively homogeneous:
    # its logits are 255x TF1's, all of them
    import numpy as np

    from pgtwin.parity.parity_rows import output_rows
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 4))
    [row] = output_rows({"logits": logits}, {"logits": 255.0 * logits}, 1e-5, 1e-6, "",
                        sides=("TF1Program", "TF2Program"))
    assert not row.ok and row.note.startswith("TF2Program's 'logits' is 255x TF1Program's, all "
                                              "of it: an input scaled on one side only")
    # a constant apart is no factor: the offset is named instead
    [other] = output_rows({"logits": logits}, {"logits": logits + 0.5}, 1e-5, 1e-6, "")
    assert other.note == ("eager_fn's 'logits' is legacy_build's + 0.5, all of it: a constant "
                          "term on one side only")
    # two single numbers (an entropy, a mean) are always one factor apart: no hint there
    [scalar] = output_rows({"entropy": np.float64(1.0)}, {"entropy": np.float64(1.339)},
                           1e-5, 1e-6, "")
    assert not scalar.ok and scalar.note == ""


def test_no_activation_note_where_an_output_through_every_activated_layer_agrees():
    # TF1 squashes the mean as a layer's activation, tanh(h @ w2 + b2), where the Keras port
    # writes tf.tanh(self.pi(h)) in call(): tanh x2 against x1, counted. The mean agrees and
    # is computed through both tanh layers, so the activations are not why log_prob parts
    # (before, that row read "give each layer its TF1 activation").
    from types import SimpleNamespace

    from pgtwin.parity.ladder import Row
    from pgtwin.parity.output_notes import with_layer_hints

    with tf.Graph().as_default():
        tf1.set_random_seed(0)  # op determinism may be on in this process
        x = tf1.placeholder(tf.float32, [None, 3])
        h = tf.tanh(tf.matmul(x, tf1.get_variable("w1", [3, 4])) + tf1.get_variable("b1", [4]))
        mu = tf.tanh(tf.matmul(h, tf1.get_variable("w2", [4, 1]))
                     + tf1.get_variable("b2", [1]))
        logp = -tf.square(1.0 - mu) - tf1.get_variable("log_std", [1])
        legacy = SimpleNamespace(loss=-tf.reduce_mean(logp), outputs={"mu": mu, "logp": logp},
                                 state={})
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(1)])
    eager = SimpleNamespace(layers=lambda: model.layers, state={},
                            variables={v.path: v.value for v in model.trainable_variables})
    parted = Row("outputs", "logp", 0.1, 0.1, False, "", "float32")
    agreed = Row("outputs", "mu", 0.0, 0.0, True, "", "float32")
    assert with_layer_hints([agreed, parted], legacy, eager) == [agreed, parted]
    # with the mean parting too, the counts are the cause said
    mu_parted = Row("outputs", "mu", 0.1, 0.1, False, "", "float32")
    noted = with_layer_hints([mu_parted, parted], legacy, eager)
    assert all(r.note.startswith("the activations differ: TF1's loss is computed through "
                                 "tanh x2, the Keras layers apply tanh x1") for r in noted)
