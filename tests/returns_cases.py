"""Hand-derived cases for ``pgtwin_core.returns.discounted_returns``, kept in one place.

Every expected number has its derivation next to it, read bottom-up (t = T-1 first), as
the recursion runs. Numbers are chosen to be exact in binary where the gamma allows it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

F, T = False, True


@dataclass(frozen=True)
class ReturnsCase:
    """One call of ``discounted_returns`` and the returns it must give."""

    name: str
    """Test id."""
    rewards: np.ndarray
    """float [T] or [T, N]."""
    terminated: np.ndarray
    """bool, shape of rewards."""
    truncated: np.ndarray
    """bool, shape of rewards."""
    gamma: float
    """Discount in [0, 1]."""
    expected: np.ndarray
    """float64, shape of rewards."""
    bootstrap: np.ndarray | None = field(default=None)
    """float, shape of rewards, or None for zeros."""


CASES = (
    ReturnsCase(
        name="terminated_mid_array",
        rewards=np.array([1.0, 0.5, 2.0, 1.0]),
        terminated=np.array([F, T, F, T]),
        truncated=np.array([F, F, F, F]),
        gamma=0.9,
        # G_3 = 1.0                   (terminated)
        # G_2 = 2.0 + 0.9 * G_3 = 2.9
        # G_1 = 0.5                   (terminated: G_2 belongs to the next episode)
        # G_0 = 1.0 + 0.9 * G_1 = 1.45
        expected=np.array([1.45, 0.5, 2.9, 1.0]),
    ),
    ReturnsCase(
        name="truncated_with_bootstrap",
        rewards=np.array([1.0, 2.0, 3.0]),
        terminated=np.array([F, F, T]),
        truncated=np.array([F, T, F]),
        gamma=0.5,
        # bootstrap[0] and bootstrap[2] are never read: step 0 continues, step 2 terminates.
        bootstrap=np.array([100.0, 10.0, 100.0]),
        # G_2 = 3.0                         (terminated)
        # G_1 = 2.0 + 0.5 * bootstrap[1] = 2.0 + 0.5 * 10.0 = 7.0   (truncated)
        # G_0 = 1.0 + 0.5 * G_1 = 4.5
        expected=np.array([4.5, 7.0, 3.0]),
    ),
    ReturnsCase(
        name="rollout_cut_bootstraps_last_row",
        rewards=np.array([1.0, 1.0, 1.0]),
        terminated=np.array([F, F, F]),
        truncated=np.array([F, F, F]),
        gamma=0.5,
        bootstrap=np.array([100.0, 100.0, 4.0]),
        # G_2 = 1.0 + 0.5 * bootstrap[2] = 1.0 + 0.5 * 4.0 = 3.0   (still running at T-1)
        # G_1 = 1.0 + 0.5 * G_2 = 2.5
        # G_0 = 1.0 + 0.5 * G_1 = 2.25
        expected=np.array([2.25, 2.5, 3.0]),
    ),
    ReturnsCase(
        name="rollout_cut_default_bootstrap_is_zero",
        rewards=np.array([1.0, 2.0]),
        terminated=np.array([F, F]),
        truncated=np.array([F, F]),
        gamma=0.5,
        # G_1 = 2.0 + 0.5 * 0.0 = 2.0
        # G_0 = 1.0 + 0.5 * G_1 = 2.0
        expected=np.array([2.0, 2.0]),
    ),
    ReturnsCase(
        name="gamma_0_gives_rewards",
        rewards=np.array([1.0, -2.0, 3.0]),
        terminated=np.array([F, F, T]),
        truncated=np.array([F, T, F]),
        gamma=0.0,
        bootstrap=np.array([7.0, 7.0, 7.0]),
        # G_t = r_t + 0 * (anything) = r_t, bootstrap included.
        expected=np.array([1.0, -2.0, 3.0]),
    ),
    ReturnsCase(
        name="gamma_1_undiscounted_sums",
        rewards=np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
        terminated=np.array([F, T, F, F, T]),
        truncated=np.array([F, F, F, F, F]),
        gamma=1.0,
        # episode 1 = steps 0..1: G_1 = 2; G_0 = 1 + 2 = 3
        # episode 2 = steps 2..4: G_4 = 5; G_3 = 4 + 5 = 9; G_2 = 3 + 9 = 12
        expected=np.array([3.0, 2.0, 12.0, 9.0, 5.0]),
    ),
    ReturnsCase(
        name="batch_different_boundaries_per_column",
        # column 0: terminates at t=1, then a new episode is cut at T-1 (bootstrap 2.0).
        # column 1: truncated at t=0 (bootstrap 6.0), then a new episode terminates at t=2.
        rewards=np.array([[1.0, 2.0],
                          [2.0, 2.0],
                          [4.0, 2.0]]),
        terminated=np.array([[F, F],
                             [T, F],
                             [F, T]]),
        truncated=np.array([[F, T],
                            [F, F],
                            [F, F]]),
        gamma=0.5,
        bootstrap=np.array([[0.0, 6.0],
                            [0.0, 0.0],
                            [2.0, 0.0]]),
        # column 0: G_2 = 4 + 0.5 * 2.0 = 5;  G_1 = 2 (terminated);  G_0 = 1 + 0.5 * G_1 = 2
        # column 1: G_2 = 2 (terminated);  G_1 = 2 + 0.5 * G_2 = 3;  G_0 = 2 + 0.5 * 6.0 = 5
        expected=np.array([[2.0, 5.0],
                           [2.0, 3.0],
                           [5.0, 2.0]]),
    ),
)
