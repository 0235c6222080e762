"""A Gaussian log-density or entropy computed from another reading of the scale on one side
(the std used as a variance, a log-std used as the std): named from the outputs that agree
(pgtwin.parity.gaussian_notes)."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.code_parity import compare_programs
from pgtwin.parity.gaussian_notes import gaussian_note
from pgtwin.parity.ladder import compare_arrays
from pgtwin.parity.programs import TF1Program, TF2Program

tf1 = tf.compat.v1
LOG_2PI = np.log(2.0 * np.pi)


def _outputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    a, mu = rng.normal(size=(2, 6, 2))
    std = rng.uniform(0.3, 2.0, size=(6, 2))
    return a, mu, std


def _note(item, tf1_value, tf2_value, mu, std, a):
    row = compare_arrays("outputs", item, tf1_value, tf2_value, 1e-10, 1e-12, "")
    return gaussian_note(row, {item: tf1_value, "mu": mu, "std": std},
                         {item: tf2_value, "mu": mu, "std": std}, {"actions": a},
                         ["mu", "std"])


def test_a_std_used_as_a_variance_is_named_with_each_sides_reading():
    a, mu, std = _outputs()
    # by hand: log N(a; mu, sigma) = -0.5 ((a - mu) / sigma)^2 - log sigma - 0.5 log 2 pi,
    # summed over the 2 action dimensions; TF2 puts std where sigma^2 goes
    right = (-0.5 * ((a - mu) / std) ** 2 - np.log(std) - 0.5 * LOG_2PI).sum(-1)
    as_var = (-0.5 * (a - mu) ** 2 / std - 0.5 * np.log(std) - 0.5 * LOG_2PI).sum(-1)
    assert _note("logp", right, as_var, mu, std, a) == (
        "TF2Program's 'logp' is the Gaussian log-density of 'actions' (mean 'mu') with 'std' "
        "read as the variance (-0.5 (a - mu)^2 / s - 0.5 log s - 0.5 log(2 pi), s = 'std'), "
        "where TF1Program's reads it as the standard deviation: give the TF2 code 'std' as "
        "the standard deviation (Normal(loc, scale) takes the standard deviation; a "
        "hand-written log-density divides (a - mu)^2 by the variance, std^2)")


def test_a_log_std_read_as_the_std_and_a_mean_entropy_are_named():
    a, mu, log_std = _outputs(1)
    log_std = log_std - 1.0  # the head's raw values, some below 0
    sigma = np.exp(log_std)
    right = -0.5 * ((a - mu) / sigma) ** 2 - log_std - 0.5 * LOG_2PI  # per element
    row = compare_arrays("outputs", "logp", right, right + 1.0, 1e-10, 1e-12, "")
    outs = {"logp": right, "mu": mu, "log_std": log_std}
    # TF1 reads log_std as log sigma; a port that takes exp(log_std) as the variance:
    as_log_var = -0.5 * (a - mu) ** 2 / sigma - 0.5 * log_std - 0.5 * LOG_2PI
    note = gaussian_note(row, outs, {**outs, "logp": as_log_var}, {"actions": a},
                         ["log_std", "mu"])
    assert "with 'log_std' read as the log of the variance" in note
    assert "reads it as the log of the standard deviation" in note
    # the entropy, mean over the batch of the sum over dimensions: log sigma + 0.5 log 2 pi e
    entropy = np.mean((log_std + 0.5 * np.log(2 * np.pi * np.e)).sum(-1))
    row = compare_arrays("outputs", "entropy", entropy, entropy + 1, 1e-10, 1e-12, "")
    assert gaussian_note(row, {**outs, "entropy": entropy}, {**outs, "entropy": entropy + 1},
                         {"actions": a}, ["log_std", "mu"]) == ""  # +1 is no reading
    half = np.mean((0.5 * log_std + 0.5 * np.log(2 * np.pi * np.e)).sum(-1))  # log variance
    note = gaussian_note(row, {**outs, "entropy": entropy}, {**outs, "entropy": half},
                         {"actions": a}, ["log_std", "mu"])
    assert note.startswith("TF2Program's 'entropy' is the Gaussian entropy with 'log_std' "
                           "read as the log of the variance, where TF1Program's reads it as "
                           "the log of the standard deviation"), note


def test_values_that_follow_no_reading_get_no_note():
    a, mu, std = _outputs(2)
    right = (-0.5 * ((a - mu) / std) ** 2 - np.log(std) - 0.5 * LOG_2PI).sum(-1)
    assert _note("logp", right, right * 1.5, mu, std, a) == ""
    assert _note("logp", right * 1.5, right, mu, std, a) == ""


class GaussianPolicy:
    """TF1: mu and a softplus std head, log_prob of tf.compat.v1.distributions.Normal summed
    over the action dimensions, loss -mean(logp * adv)."""

    def __init__(self):
        tf1.set_random_seed(0)
        self.obs = tf1.placeholder(tf.float64, [None, 3], name="obs")
        self.act = tf1.placeholder(tf.float64, [None, 2], name="act")
        self.adv = tf1.placeholder(tf.float64, [None], name="adv")
        self.mu = tf.matmul(self.obs, tf1.get_variable("mu/kernel", [3, 2], tf.float64))
        self.std = tf.nn.softplus(tf.matmul(self.obs, tf1.get_variable(
            "std/kernel", [3, 2], tf.float64))) + 1e-5
        dist = tf1.distributions.Normal(loc=self.mu, scale=self.std)
        self.logp = tf.reduce_sum(dist.log_prob(self.act), axis=1)
        self.loss = -tf.reduce_mean(self.logp * self.adv)


@pytest.mark.parametrize("variance", [False, True])
def test_compare_names_a_port_that_divides_by_the_std_as_a_variance(variance):
    mu_layer = keras.layers.Dense(2, use_bias=False, name="mu", dtype="float64")
    std_layer = keras.layers.Dense(2, use_bias=False, name="std", dtype="float64")

    class Port(tf.Module):
        def __init__(self):
            super().__init__()
            self.layers = [mu_layer, std_layer]

    def loss(agent, b):
        mu = mu_layer(b["obs"])
        std = tf.nn.softplus(std_layer(b["obs"])) + 1e-5
        var = std if variance else tf.square(std)
        logp = tf.reduce_sum(-0.5 * tf.square(b["act"] - mu) / var - 0.5 * tf.math.log(var)
                             - 0.5 * np.log(2 * np.pi), axis=1)
        return {"loss": -tf.reduce_mean(logp * b["adv"]), "mu": mu, "std": std, "logp": logp}

    rng = np.random.default_rng(4)
    batch = {"obs": rng.normal(size=(16, 3)), "act": rng.normal(size=(16, 2)),
             "adv": rng.normal(size=16)}
    report = compare_programs(
        TF1Program(build=GaussianPolicy, loss="loss", feeds={k: k for k in batch},
                   outputs={"mu": "mu", "std": "std", "logp": "logp"}),
        TF2Program(build=Port, loss=loss), batch, steps=0, dtype="float64")
    rows = {r.item: r for r in report.rows if r.rung == "outputs"}
    assert rows["mu"].ok and rows["std"].ok, report.to_table()
    if not variance:
        assert rows["logp"].ok, report.to_table()
        return
    assert report.first_failure.item == "logp"
    assert "'std' read as the variance" in rows["logp"].note, rows["logp"].note


def test_a_constant_left_out_per_dimension_each_row_covers_is_named():
    # a parametrized action's log-density over 1 or 2 parameters a row: without its
    # -0.5 log(2 pi) per parameter, the rows part by 1 or 2 x 0.919, no common offset
    from pgtwin.parity.parity_rows import output_rows
    rng = np.random.default_rng(20)
    logp = rng.normal(size=12)
    dims = np.array([1, 2] * 6)
    [row] = output_rows({"logp": logp}, {"logp": logp + dims * 0.5 * LOG_2PI}, 1e-5, 1e-6,
                        "", sides=("TF1Program", "TF2Program"))
    assert row.note.startswith("TF2Program's 'logp' is TF1Program's + k x 0.5 log(2 pi) on "
                               "every element (k from 1 to 2): the Gaussian log-density's "
                               "constant"), row.note
    [other] = output_rows({"logp": logp}, {"logp": logp + dims * 0.7}, 1e-5, 1e-6, "",
                          sides=("TF1Program", "TF2Program"))
    assert "log(2 pi)" not in other.note
