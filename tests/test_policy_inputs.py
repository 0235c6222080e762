"""pgtwin_core.policy_inputs: what both twins accept as actions, refused by name where not.

A Gaussian policy's actions were cast without a look at their dtype: complex actions lost
their imaginary part silently (numpy's ComplexWarning only), and objects were accepted.
"""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin_core.policy_inputs import as_actions
from pgtwin_core.specs import PolicySpec

GAUSSIAN = PolicySpec("gaussian", (3,), 2, hidden=(4,))
CATEGORICAL = PolicySpec("categorical", (3,), 4, hidden=(4,))


@pytest.mark.parametrize("actions, message", [
    (np.array([[1 + 5j, 0], [0, 0]]), r"actions has dtype complex128; expected real numbers"),
    (np.array([[1.0, 0.0], [0.0, None]], dtype=object), r"actions has dtype object"),
    (np.array([["a", "b"], ["c", "d"]]), r"actions has dtype <U1"),
    ([[0.0, 1.0], [0.5]], r"actions is not one numeric array"),
])
def test_gaussian_actions_that_are_not_real_numbers_are_refused_by_name(actions, message):
    with pytest.raises(ValueError, match=message):
        as_actions(GAUSSIAN, actions, 2, dtype="float32")


def test_categorical_actions_of_none_say_none():
    with pytest.raises(ValueError, match=r"actions is None; expected an array"):
        as_actions(CATEGORICAL, None, 4, dtype="float32")


def test_real_actions_still_pass_unchanged():
    got = as_actions(GAUSSIAN, [[0.25, -1.0], [2.0, 0.0]], 2, dtype="float64")
    np.testing.assert_array_equal(got, [[0.25, -1.0], [2.0, 0.0]])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(as_actions(CATEGORICAL, [3, 0], 2, dtype="float32"), [3, 0])
