"""The policy, its log-probabilities, entropy and loss written again in numpy: an oracle.

An independent second writing of what ``pgtwin.mode_agnostic`` computes (the network of
``pgtwin_core.specs``' module docstring), loop by loop and without TensorFlow, so the one TF
copy both twins share is checked against something that is not itself. Per-sample gradients
come from central differences of :func:`log_probs`, so no gradient code is involved either.
All in float64.
"""
from __future__ import annotations

import math

import numpy as np

from pgtwin_core.specs import PolicySpec

LOG_2PI = math.log(2.0 * math.pi)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_last_hidden(spec: PolicySpec, w: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """``h_K [B, units]``: ``z = [x_t, h] W + b``, gates i, f, g, o; c and h start at zero."""
    units = spec.hidden[0]
    h = np.zeros((obs.shape[0], units))
    c = np.zeros_like(h)
    for t in range(spec.history):
        z = np.concatenate([obs[:, t, :], h], axis=1) @ w["policy/lstm/kernel"] + w["policy/lstm/bias"]
        i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
    return h


def dist_params(spec: PolicySpec, w: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """``[B, num_params]``: logits, or ``[squash(z), log_std]`` for a Gaussian."""
    obs = np.asarray(obs, np.float64)
    x = _lstm_last_hidden(spec, w, obs) if spec.torso == "lstm" else obs
    act = np.tanh if spec.activation == "tanh" else (lambda v: np.maximum(v, 0.0))
    for i in range(len(spec.dense_sizes)):
        x = act(x @ w[f"policy/dense_{i}/kernel"] + w[f"policy/dense_{i}/bias"])
    z = x @ w["policy/head/kernel"] + w["policy/head/bias"]
    if spec.is_discrete:
        return z
    low, high = np.asarray(spec.action_low, float), np.asarray(spec.action_high, float)
    mean = {"none": z, "sigmoid": low + (high - low) * _sigmoid(z),
            "tanh": (high + low) / 2 + (high - low) / 2 * np.tanh(z)}[spec.squash]
    return np.concatenate([mean, np.broadcast_to(w["policy/log_std"], z.shape)], axis=1)


def log_prob(spec: PolicySpec, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """``[B]``: ``log softmax(z)[a]``, or the diagonal Gaussian's log-density at ``a``."""
    if spec.is_discrete:
        shifted = params - params.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return logp[np.arange(len(actions)), actions]
    mean, log_std = np.split(params, 2, axis=1)
    u = (actions - mean) / np.exp(log_std)
    return np.sum(-0.5 * u ** 2 - log_std - 0.5 * LOG_2PI, axis=1)


def entropy(spec: PolicySpec, params: np.ndarray) -> np.ndarray:
    """``[B]``: ``-sum_k p_k log p_k``, or ``sum(log_std) + d/2 (1 + log 2 pi)``."""
    if spec.is_discrete:
        p = np.exp(params - params.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return -np.sum(p * np.log(p), axis=1)
    _, log_std = np.split(params, 2, axis=1)
    return np.sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=1)


def log_probs(spec: PolicySpec, w: dict[str, np.ndarray], obs: np.ndarray,
              actions: np.ndarray) -> np.ndarray:
    """``[B]``: log pi(a_i|s_i) under weights ``w``."""
    return log_prob(spec, dist_params(spec, w, obs), actions)


def reinforce_loss(log_probs: np.ndarray, advantages: np.ndarray, weights: np.ndarray,
                   entropies: np.ndarray, entropy_coef: float) -> float:
    """``-sum_i w_i A_i log pi_i - c sum_i w_i H_i``."""
    return float(-np.sum(weights * advantages * log_probs) - entropy_coef * np.sum(weights * entropies))


def per_sample_gradients(spec: PolicySpec, w: dict[str, np.ndarray], obs: np.ndarray,
                         actions: np.ndarray, eps: float = 1e-6) -> dict[str, np.ndarray]:
    """``{name: [B, *shape]}``: d log pi(a_i|s_i) / d w by central differences, every element.

    Errs by ~eps^2 f''' / 6 plus rounding ~1e-16 / eps: about 1e-9 relative here.
    """
    out = {}
    for name, value in w.items():
        grad = np.zeros((obs.shape[0], *value.shape))
        for index in np.ndindex(value.shape):
            sides = []
            for sign in (1.0, -1.0):
                moved = value.copy()
                moved[index] += sign * eps
                sides.append(log_probs(spec, {**w, name: moved}, obs, actions))
            grad[(slice(None), *index)] = (sides[0] - sides[1]) / (2 * eps)
        out[name] = grad
    return out
