"""Tests for ``pgtwin_core.config.ReinforceConfig``: defaults, every invalid value, derived values."""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from pgtwin_core.config import BASELINES, ReinforceConfig


def test_defaults_are_valid():
    c = ReinforceConfig()
    assert (c.gamma, c.learning_rate, c.optimizer, c.baseline) == (0.99, 1e-2, "adam", "none")
    assert (c.adam_beta1, c.adam_beta2, c.adam_epsilon) == (0.9, 0.999, 1e-8)
    assert (c.normalize_returns, c.entropy_coef, c.max_grad_norm) == (True, 0.0, None)
    assert (c.num_envs, c.num_steps, c.update_path, c.dtype) == (16, 128, "recompute", "float32")
    assert c.baseline_memory == 0.5  # docs/baselines.md, Decision 6
    assert not c.needs_per_sample_gradients


def test_batch_size_is_num_envs_times_num_steps():
    assert ReinforceConfig().batch_size == 16 * 128
    assert ReinforceConfig(num_envs=3, num_steps=5).batch_size == 15
    # numpy integers (e.g. from a sweep grid) are accepted and stored as python ints.
    c = ReinforceConfig(num_envs=np.int64(4), num_steps=np.int32(2))
    assert c.batch_size == 8 and type(c.num_envs) is int and type(c.batch_size) is int


def test_valid_edge_values():
    for changes in [dict(gamma=0.0), dict(gamma=1.0), dict(adam_beta1=0.0), dict(entropy_coef=0.0),
                    dict(max_grad_norm=0.5), dict(optimizer="sgd"), dict(dtype="float64"),
                    dict(update_path="cached"), dict(normalize_returns=False), dict(gamma=np.float32(0.5)),
                    dict(baseline_memory=0.0), dict(baseline_memory=0.999)]:
        ReinforceConfig(**changes)
    for baseline in BASELINES:
        assert ReinforceConfig(baseline=baseline).needs_per_sample_gradients == baseline.startswith("optimal")


INVALID = [
    ("gamma", -0.1, "must be a number in [0, 1]"),
    ("gamma", 1.5, "must be a number in [0, 1]"),
    ("gamma", math.nan, "must be a number in [0, 1]"),
    ("gamma", None, "must be a number in [0, 1]"),
    ("gamma", True, "must be a number in [0, 1]"),
    ("learning_rate", 0.0, "must be a finite number > 0"),
    ("learning_rate", -1e-3, "must be a finite number > 0"),
    ("learning_rate", math.inf, "must be a finite number > 0"),
    ("learning_rate", "1e-3", "must be a finite number > 0"),
    ("optimizer", "rmsprop", "must be one of ('adam', 'sgd')"),
    ("optimizer", ["adam"], "must be one of ('adam', 'sgd')"),
    ("adam_beta1", 1.0, "must be a number in [0, 1)"),
    ("adam_beta1", -0.5, "must be a number in [0, 1)"),
    ("adam_beta2", 1.0, "must be a number in [0, 1)"),
    ("adam_beta2", math.nan, "must be a number in [0, 1)"),
    ("adam_epsilon", 0.0, "must be a finite number > 0"),
    ("adam_epsilon", math.inf, "must be a finite number > 0"),
    ("normalize_returns", "False", "must be True or False"),
    ("normalize_returns", 1, "must be True or False"),
    ("jit_compile", "yes", "must be True or False"),
    ("jit_compile", None, "must be True or False"),
    ("baseline", "critic", f"must be one of {BASELINES}"),
    ("baseline_memory", 1.0, "must be a number in [0, 1)"),
    ("baseline_memory", -0.1, "must be a number in [0, 1)"),
    ("baseline_memory", math.nan, "must be a number in [0, 1)"),
    ("baseline_memory", None, "must be a number in [0, 1)"),
    ("baseline_shrinkage", 1.5, "must be None (off), a number in [0, 1] or 'auto'"),
    ("baseline_shrinkage", "Auto", "must be None (off), a number in [0, 1] or 'auto'"),
    ("baseline_shrinkage", True, "must be None (off), a number in [0, 1] or 'auto'"),
    ("entropy_coef", -0.01, "must be a finite number >= 0"),
    ("entropy_coef", math.nan, "must be a finite number >= 0"),
    ("max_grad_norm", 0.0, "must be None or a finite number > 0"),
    ("max_grad_norm", math.inf, "must be None or a finite number > 0"),
    ("max_grad_norm", math.nan, "must be None or a finite number > 0"),
    ("num_envs", 0, "must be an int >= 1"),
    ("num_envs", 2.0, "must be an int >= 1"),
    ("num_envs", True, "must be an int >= 1"),
    ("num_steps", -4, "must be an int >= 1"),
    ("num_steps", None, "must be an int >= 1"),
    ("update_path", "eager", "must be one of ('recompute', 'cached')"),
    ("dtype", "float16", "must be one of ('float32', 'float64')"),
    ("gpomdp", 1, "must be True or False"),
    ("value_hidden", (), "must be None (the policy's) or a non-empty tuple of ints >= 1"),
    ("value_hidden", [], "must be None (the policy's) or a non-empty tuple of ints >= 1"),
    ("value_hidden", (64, 0), "must be None (the policy's) or a non-empty tuple of ints >= 1"),
    ("value_learning_rate", 0.0, "must be a finite number > 0"),
    ("value_fit_steps", 0, "must be an int >= 1"),
    ("value_fit", "during", "must be one of ('after', 'before')"),
    ("value_horizon", -1, "must be an int >= 0 (the env's time limit; 0: none)"),
    ("value_horizon", 1.5, "must be an int >= 0 (the env's time limit; 0: none)"),
    ("gae_lambda", 1.5, "must be None (Monte-Carlo returns) or a number in [0, 1]"),
    ("gae_lambda", "0.9", "must be None (Monte-Carlo returns) or a number in [0, 1]"),
    ("natural_kl", 0.0, "must be None (plain gradient steps) or a finite number > 0 (the KL "
                        "of a natural gradient step)"),
    ("natural_kl", math.inf, "must be None (plain gradient steps) or a finite number > 0 "
                             "(the KL of a natural gradient step)"),
    ("natural_damping", 0.0, "must be a finite number > 0"),
    ("natural_damping", None, "must be a finite number > 0"),
    ("natural_cg_iters", 0, "must be an int >= 1"),
    ("natural_cg_iters", 2.0, "must be an int >= 1"),
    ("natural_backtracks", -1, "must be an int >= 0 (0: no line search)"),
    ("natural_backtracks", True, "must be an int >= 0 (0: no line search)"),
]


def test_every_field_has_an_invalid_case():
    fields = {f.name for f in dataclasses.fields(ReinforceConfig)}
    assert fields == {name for name, _, _ in INVALID}


@pytest.mark.parametrize("name,value,why", INVALID, ids=[f"{n}={v!r}" for n, v, _ in INVALID])
def test_invalid_value_names_the_field(name, value, why):
    with pytest.raises(ValueError, match=re.escape(f"ReinforceConfig.{name}={value!r} {why}")):
        ReinforceConfig(**{name: value})


def test_gpomdp_needs_a_per_step_baseline():
    with pytest.raises(ValueError, match=re.escape(
            "ReinforceConfig.gpomdp=True cannot serve baseline='optimal_per_param': GPOMDP "
            "weights per-step terms, use one of ('none', 'mean', 'time_mean', 'value')")):
        ReinforceConfig(gpomdp=True, baseline="optimal_per_param")
    assert ReinforceConfig(gpomdp=True, baseline="time_mean").gpomdp


def test_cached_path_refuses_the_value_baseline():
    with pytest.raises(ValueError, match=re.escape(
            "ReinforceConfig.update_path='cached' cannot serve baseline='value': the value "
            "net is fitted between the rollout and the update")):
        ReinforceConfig(update_path="cached", baseline="value")


def test_value_hidden_from_json_is_a_tuple():
    # A run's settings are JSON: value_hidden comes back as a list.
    assert ReinforceConfig(value_hidden=[32, 16]).value_hidden == (32, 16)


def test_replace_validates_again_and_keeps_the_rest():
    c = ReinforceConfig(gamma=0.5, num_envs=2)
    d = c.replace(learning_rate=0.1)
    assert (d.gamma, d.num_envs, d.learning_rate) == (0.5, 2, 0.1)
    assert c.learning_rate == 1e-2  # frozen: the original is unchanged
    with pytest.raises(ValueError, match=re.escape("ReinforceConfig.num_steps=0 must be an int >= 1")):
        c.replace(num_steps=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.gamma = 0.9
