"""Hand-derived REINFORCE cases that both twins' tests assert (trfl style).

Each case is a tiny policy with chosen weights, a two-step batch, and every number an agent
must produce on it, derived by hand in the comments next to it. Numbers are written as the
closed forms of the derivation (``LN3 / 2``...), never computed by the code under test.

Conventions shared by all cases (the config below makes the advantages the rewards):
    gamma = 0, no return normalisation, no baseline  =>  A_i = R_i = r_i
    T = 2 steps, N = 1 env, both valid               =>  w_i = 1/2
    loss = -sum_i w_i A_i log pi(a_i|s_i) - c * sum_i w_i H_i     (c = entropy_coef)
    dL/dz_i (logits z, categorical)  = -w_i A_i (onehot(a_i) - p_i) - c w_i dH_i/dz_i
    dH/dz_k (categorical)            = -p_k (log p_k + H)
    d log pi/d mean (Gaussian)       = (a - mean) / sigma^2 = u / sigma, u = (a - mean) / sigma
    d log pi/d log_std (Gaussian)    = u^2 - 1;   dH/d log_std = 1
    one SGD step:   w' = w - lr * g
    one Adam step from zero moments: w' = w - lr * g / (|g| + eps / sqrt(1 - beta2)), up to
        Keras' float32-rounded bias correction (see HandCase.after_adam)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec

from tests.synthetic_batches import batch_of

LN2 = math.log(2.0)
LN3 = math.log(3.0)
LN_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class HandCase:
    """A policy, its weights, a batch, and what both twins must compute on them."""

    name: str
    spec: PolicySpec
    """The network; the dtype is the config's (``config(dtype)``, float64 by default)."""
    weights: dict[str, np.ndarray]
    batch: Batch
    entropy_coef: float
    params: np.ndarray
    """``[B, num_params]``: logits, or ``concat(mean, log_std)``."""
    log_probs: np.ndarray
    """``[B]``: log pi(a_i|s_i)."""
    entropy: float
    """``sum_i w_i H_i``: the ``entropy`` metric of ``update``."""
    loss: float
    grads: dict[str, np.ndarray] = field(default_factory=dict)
    """Gradient of the loss by variable: every variable, or (``lstm_forward``) the head's."""

    def config(self, dtype: str = "float64", optimizer: str = "sgd",
               learning_rate: float = 0.5) -> ReinforceConfig:
        """The config that makes ``A_i = r_i`` (see the module docstring)."""
        return ReinforceConfig(gamma=0.0, normalize_returns=False, baseline="none",
                               entropy_coef=self.entropy_coef, optimizer=optimizer,
                               learning_rate=learning_rate, num_envs=1, num_steps=2,
                               dtype=dtype)

    @property
    def obs(self) -> np.ndarray:
        """``[B, *obs_shape]`` (B = T since N = 1)."""
        return self.batch.obs[:, 0]

    @property
    def actions(self) -> np.ndarray:
        """``[B]`` or ``[B, action_dim]``."""
        return self.batch.actions[:, 0]

    @property
    def grad_norm(self) -> float:
        """Global norm of the gradient (cases that list every variable's gradient)."""
        return math.sqrt(sum(float(np.sum(np.square(g))) for g in self.grads.values()))

    def after_sgd(self, learning_rate: float) -> dict[str, np.ndarray]:
        """Weights after one SGD step: ``w - lr * g``."""
        return {n: self.weights[n] - learning_rate * self.grads[n] for n in self.weights}

    def after_adam(self, learning_rate: float, beta1: float, beta2: float,
                   epsilon: float) -> dict[str, np.ndarray]:
        """Weights after one Adam step from zero moments, as Keras 3 computes it.

        m_1 = (1 - b1) g and v_1 = (1 - b2) g^2; the bias correction
        ``alpha = lr' sqrt(1 - b2') / (1 - b1')`` uses x' = float32(x) (Keras keeps the
        learning rate in a float32 variable and casts the Python betas through floatx, see
        ``legacy_graph/optimizers.py``), so
        ``w' = w - lr' [sqrt(1 - b2') / (1 - b1')] (1 - b1) g / (sqrt(1 - b2) |g| + eps)``,
        which is ``lr g / (|g| + eps / sqrt(1 - b2))`` up to ~7e-6 for the default betas.
        """
        lr, b1r, b2r = (float(np.float32(x)) for x in (learning_rate, beta1, beta2))
        alpha = lr * math.sqrt(1.0 - b2r) / (1.0 - b1r)
        return {n: self.weights[n] - alpha * (1.0 - beta1) * self.grads[n]
                / (math.sqrt(1.0 - beta2) * np.abs(self.grads[n]) + epsilon)
                for n in self.weights}


def _a(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.float64)


# ----------------------------------------------------------------------------------------
# Case 1: one-layer categorical policy, logits z = s @ K + b, two actions.
#   K = [[ln 3, 0], [0, 0]], b = [0, 0]
#   s_1 = [1, 0] -> z_1 = [ln 3, 0] -> p_1 = [3/4, 1/4]   (e^{ln 3} = 3; 3 / (3 + 1))
#   s_2 = [0, 1] -> z_2 = [0, 0]    -> p_2 = [1/2, 1/2]
#   a = [0, 1], r = A = [1, -2], w = [1/2, 1/2]
#   log pi_1 = ln(3/4) = ln 3 - 2 ln 2;  log pi_2 = ln(1/2) = -ln 2
#   H_1 = -(3/4 ln(3/4) + 1/4 ln(1/4)) = 2 ln 2 - (3/4) ln 3;  H_2 = ln 2
#   entropy metric = (H_1 + H_2) / 2 = (3/2) ln 2 - (3/8) ln 3
#   loss = -(1/2)(1 * (ln 3 - 2 ln 2) + (-2)(-ln 2)) = -(1/2) ln 3
#   dL/dz_1 = -(1/2)(1)([1, 0] - [3/4, 1/4]) = [-1/8, 1/8]
#   dL/dz_2 = -(1/2)(-2)([0, 1] - [1/2, 1/2]) = [-1/2, 1/2]
#   dL/db = dL/dz_1 + dL/dz_2 = [-5/8, 5/8]
#   dL/dK = s_1^T dL/dz_1 + s_2^T dL/dz_2 = [[-1/8, 1/8], [-1/2, 1/2]]
#   |g|^2 = 2 (1/8)^2 + 2 (1/2)^2 + 2 (5/8)^2 = 84/64  ->  grad_norm = sqrt(84)/8 = sqrt(21)/4
_CAT_SPEC = PolicySpec("categorical", (2,), 2, hidden=())
_CAT_WEIGHTS = {"policy/head/kernel": _a([LN3, 0.0], [0.0, 0.0]),
                "policy/head/bias": _a(0.0, 0.0)}
_CAT_BATCH = batch_of(obs=[[1.0, 0.0], [0.0, 1.0]], actions=[0, 1], rewards=[1.0, -2.0])

CATEGORICAL = HandCase(
    name="categorical_one_layer",
    spec=_CAT_SPEC, weights=_CAT_WEIGHTS, batch=_CAT_BATCH, entropy_coef=0.0,
    params=_a([LN3, 0.0], [0.0, 0.0]),
    log_probs=_a(LN3 - 2 * LN2, -LN2),
    entropy=1.5 * LN2 - 0.375 * LN3,
    loss=-LN3 / 2,
    grads={"policy/head/kernel": _a([-1 / 8, 1 / 8], [-1 / 2, 1 / 2]),
           "policy/head/bias": _a(-5 / 8, 5 / 8)},
)
CATEGORICAL_GRAD_NORM = math.sqrt(21.0) / 4
"""The global gradient norm of case 1, from the |g|^2 = 84/64 above."""

# ----------------------------------------------------------------------------------------
# Case 2: case 1 with an entropy bonus c = 1/2.
#   dH_1/dz: p_1 = [3/4, 1/4], log p_1 + H_1 = [ln 3 - 2 ln 2 + H_1, -2 ln 2 + H_1]
#                                            = [(1/4) ln 3, -(3/4) ln 3]
#            dH_1/dz = -p_1 (log p_1 + H_1) = [-(3/16) ln 3, (3/16) ln 3]
#   dH_2/dz = 0 (uniform: log p_2 + H_2 = -ln 2 + ln 2 = 0)
#   loss = -(1/2) ln 3 - c (H_1 + H_2)/2 = -(1/2) ln 3 - (1/2)((3/2) ln 2 - (3/8) ln 3)
#        = -(5/16) ln 3 - (3/4) ln 2
#   extra dL/dz_1 = -c w_1 dH_1/dz = -(1/4)[-(3/16) ln 3, (3/16) ln 3] = [(3/64) ln 3, -(3/64) ln 3]
#   dL/db = [-5/8 + (3/64) ln 3, 5/8 - (3/64) ln 3]
#   dL/dK = [[-1/8 + (3/64) ln 3, 1/8 - (3/64) ln 3], [-1/2, 1/2]]   (s_1 = [1, 0])
CATEGORICAL_ENTROPY = HandCase(
    name="categorical_entropy_bonus",
    spec=_CAT_SPEC, weights=_CAT_WEIGHTS, batch=_CAT_BATCH, entropy_coef=0.5,
    params=CATEGORICAL.params, log_probs=CATEGORICAL.log_probs, entropy=CATEGORICAL.entropy,
    loss=-(5 / 16) * LN3 - 0.75 * LN2,
    grads={"policy/head/kernel": _a([-1 / 8 + 3 / 64 * LN3, 1 / 8 - 3 / 64 * LN3], [-1 / 2, 1 / 2]),
           "policy/head/bias": _a(-5 / 8 + 3 / 64 * LN3, 5 / 8 - 3 / 64 * LN3)},
)

# ----------------------------------------------------------------------------------------
# Case 3: one-layer Gaussian, 1-D action, no squash: mean = 2 s + 0, log_std = ln 2 (sigma 2).
#   s = [1, 0] -> mean = [2, 0];  a = [4, -1]  ->  u = (a - mean)/2 = [1, -1/2]
#   log pi = -u^2/2 - ln 2 - ln(2 pi)/2:  [-1/2 - C, -1/8 - C],  C = ln 2 + ln(2 pi)/2
#   H = ln 2 + (1 + ln 2 pi)/2 for both  -> entropy metric H
#   loss = -(1/2)(1 (-1/2 - C) + (-2)(-1/8 - C)) = -(1/2)(-1/4 + C) = 1/8 - C/2
#   dL/dmean_i = -w A u / sigma:  -(1/2)(1)(1)/2 = -1/4;  -(1/2)(-2)(-1/2)/2 = -1/4
#   dL/dK = 1 * (-1/4) + 0 * (-1/4) = -1/4;  dL/db = -1/2
#   dL/dlog_std = -sum w A (u^2 - 1) = -((1/2)(1)(0) + (1/2)(-2)(-3/4)) = -3/4
_C3 = LN2 + LN_2PI / 2
GAUSSIAN = HandCase(
    name="gaussian_one_layer",
    spec=PolicySpec("gaussian", (1,), 1, hidden=(), squash="none", log_std_init=0.0),
    weights={"policy/head/kernel": _a([2.0]), "policy/head/bias": _a(0.0),
             "policy/log_std": _a(LN2)},
    batch=batch_of(obs=[[1.0], [0.0]], actions=[[4.0], [-1.0]], rewards=[1.0, -2.0]),
    entropy_coef=0.0,
    params=_a([2.0, LN2], [0.0, LN2]),
    log_probs=_a(-0.5 - _C3, -0.125 - _C3),
    entropy=LN2 + (1 + LN_2PI) / 2,
    loss=0.125 - _C3 / 2,
    grads={"policy/head/kernel": _a([-0.25]), "policy/head/bias": _a(-0.5),
           "policy/log_std": _a(-0.75)},
)

# ----------------------------------------------------------------------------------------
# Case 4: one-layer Gaussian, sigmoid-squashed into [0, 1], entropy bonus c = 1/4.
#   mean = sigmoid(s K + b), K = 1, b = 0, log_std = -ln 2 (sigma 1/2)
#   s = [0, ln 3] -> z = [0, ln 3] -> mean = [1/2, 3/4]  (sigmoid(ln 3) = 3/(3+1))
#   d mean/dz = mean (1 - mean) = [1/4, 3/16]
#   a = [1, 1/2] -> u = (a - mean)/sigma = [1, -1/2]
#   log pi = -u^2/2 + ln 2 - ln(2 pi)/2 = [-1/2 + D, -1/8 + D],  D = ln 2 - ln(2 pi)/2
#   H = -ln 2 + (1 + ln 2 pi)/2  -> entropy metric H
#   loss = -(1/2)(-1/2 + D - 2(-1/8 + D)) - H/4 = (1/2)(1/4 + D) - H/4
#        = 1/8 + (1/2) ln 2 - ln(2 pi)/4 + ln(2)/4 - 1/8 - ln(2 pi)/8 = (3/4) ln 2 - (3/8) ln 2 pi
#   dL/dmean_i = -w A u / sigma: -(1/2)(1)(1)(2) = -1;  -(1/2)(-2)(-1/2)(2) = -1
#   dL/dz = [-1 * 1/4, -1 * 3/16] = [-1/4, -3/16]
#   dL/dK = 0 * (-1/4) + ln 3 * (-3/16) = -(3/16) ln 3;  dL/db = -7/16
#   dL/dlog_std = -sum w A (u^2 - 1) - c sum w = -((1/2)(-2)(-3/4)) - 1/4 = -1
GAUSSIAN_SIGMOID = HandCase(
    name="gaussian_sigmoid_entropy_bonus",
    spec=PolicySpec("gaussian", (1,), 1, hidden=(), squash="sigmoid", action_low=(0.0,),
                    action_high=(1.0,), log_std_init=0.0),
    weights={"policy/head/kernel": _a([1.0]), "policy/head/bias": _a(0.0),
             "policy/log_std": _a(-LN2)},
    batch=batch_of(obs=[[0.0], [LN3]], actions=[[1.0], [0.5]], rewards=[1.0, -2.0]),
    entropy_coef=0.25,
    params=_a([0.5, -LN2], [0.75, -LN2]),
    log_probs=_a(-0.5 + LN2 - LN_2PI / 2, -0.125 + LN2 - LN_2PI / 2),
    entropy=-LN2 + (1 + LN_2PI) / 2,
    loss=0.75 * LN2 - 0.375 * LN_2PI,
    grads={"policy/head/kernel": _a([-3 / 16 * LN3]), "policy/head/bias": _a(-7 / 16),
           "policy/log_std": _a(-1.0)},
)

# ----------------------------------------------------------------------------------------
# Case 5: extreme logits (trfl's 0 and 1000): K = 0, b = [0, 1000] -> z = [0, 1000] always.
#   log p = z - logsumexp(z) = [-1000, 0] (log(1 + e^-1000) = 0 in floating point)
#   p = [e^-1000, 1] = [0, 1] in floating point;  H = -(0 * -1000 + 1 * 0) = 0
#   a = [0, 1], A = [1, -2], c = 0.01 (the entropy gradient -p_k (log p_k + H) is 0 * -1000 = 0)
#   loss = -(1/2)(1 * (-1000) + (-2)(0)) = 500
#   dL/dz_1 = -(1/2)(1)([1, 0] - [0, 1]) = [-1/2, 1/2];  dL/dz_2 = -(1/2)(-2)([0, 1] - [0, 1]) = 0
#   dL/db = [-1/2, 1/2];  dL/dK = s_1^T [-1/2, 1/2] + 0 = [[-1/2, 1/2], [-1/2, 1/2]] (s_1 = [1, 1])
EXTREME_LOGITS = HandCase(
    name="categorical_extreme_logits",
    spec=_CAT_SPEC,
    weights={"policy/head/kernel": _a([0.0, 0.0], [0.0, 0.0]),
             "policy/head/bias": _a(0.0, 1000.0)},
    batch=batch_of(obs=[[1.0, 1.0], [-3.0, 2.0]], actions=[0, 1], rewards=[1.0, -2.0]),
    entropy_coef=0.01,
    params=_a([0.0, 1000.0], [0.0, 1000.0]),
    log_probs=_a(-1000.0, 0.0),
    entropy=0.0,
    loss=500.0,
    grads={"policy/head/kernel": _a([-0.5, 0.5], [-0.5, 0.5]),
           "policy/head/bias": _a(-0.5, 0.5)},
)

# ----------------------------------------------------------------------------------------
# Case 6: a one-unit LSTM over K = 2 steps with a zero kernel, then a two-action head.
#   kernel = 0, bias = [i, f, g, o] = [0, 0, ln 3, 0]: whatever the window holds,
#   i = f = o = sigmoid(0) = 1/2 and g = tanh(ln 3) = (9 - 1)/(9 + 1) = 4/5 at every step:
#   t=1: c = 1/2 * 0 + 1/2 * 4/5 = 2/5;       h = 1/2 tanh(2/5)
#   t=2: c = 1/2 * 2/5 + 1/2 * 4/5 = 3/5;     h_2 = 1/2 tanh(3/5)
#   head K = [[1, 0]], b = 0 -> z = [h_2, 0];  p_0 = sigmoid(h_2), p_1 = 1 - p_0
#   a = [0, 1], A = [1, -2]:  log pi = [log p_0, log p_1];  H = -(p_0 log p_0 + p_1 log p_1)
#   loss = -(1/2)(log p_0 - 2 log p_1)
#   dL/dz_1 = -(1/2)([1, 0] - p) = [-p_1/2, p_1/2];  dL/dz_2 = -(1/2)(-2)([0, 1] - p) = [-p_0, p_0]
#   dL/db = [-p_1/2 - p_0, p_1/2 + p_0];  dL/dK = h_2 dL/db (the same h_2 for both samples)
#   (the LSTM's own gradients are checked by finite differences in parity_tests)
_H2 = 0.5 * math.tanh(0.6)
_P0 = 1.0 / (1.0 + math.exp(-_H2))
_P1 = 1.0 - _P0
_DB = _a(-_P1 / 2 - _P0, _P1 / 2 + _P0)
LSTM_FORWARD = HandCase(
    name="lstm_one_unit",
    spec=PolicySpec("categorical", (2, 1), 2, torso="lstm", hidden=(1,)),
    weights={"policy/lstm/kernel": np.zeros((2, 4)), "policy/lstm/bias": _a(0.0, 0.0, LN3, 0.0),
             "policy/head/kernel": _a([1.0, 0.0]), "policy/head/bias": _a(0.0, 0.0)},
    batch=batch_of(obs=[[[0.3], [-0.7]], [[2.0], [1.5]]], actions=[0, 1], rewards=[1.0, -2.0]),
    entropy_coef=0.0,
    params=_a([_H2, 0.0], [_H2, 0.0]),
    log_probs=_a(math.log(_P0), math.log(_P1)),
    entropy=-(_P0 * math.log(_P0) + _P1 * math.log(_P1)),
    loss=-0.5 * math.log(_P0) + math.log(_P1),
    grads={"policy/head/kernel": _H2 * _DB[None, :], "policy/head/bias": _DB},
)

CASES = (CATEGORICAL, CATEGORICAL_ENTROPY, GAUSSIAN, GAUSSIAN_SIGMOID, EXTREME_LOGITS,
         LSTM_FORWARD)
FULL_GRADIENT_CASES = tuple(c for c in CASES if set(c.grads) == set(c.weights))
"""Cases whose gradient is derived for every variable (all but the LSTM)."""
