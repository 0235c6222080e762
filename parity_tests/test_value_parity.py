"""The value baseline's network agrees between the twins, rung by rung
(``pgtwin.parity.value_parity``): variables exactly, V, loss, gradients, weights after
optimizer steps (Adam, SGD), and three training updates (fit after and before), in float32
and float64, for an MLP policy and an LSTM one. The LSTM climbs Adam and fit-before only:
what it adds is its torso, and the optimizer and fit order are the MLP's rows' code."""
from __future__ import annotations

import pytest

from pgtwin.parity.value_parity import run_value_ladder

RUNGS = {"variables", "outputs", "loss", "gradients", "weights", "training"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["categorical_mlp",
                                  pytest.param("gaussian_lstm", marks=pytest.mark.slow)])
def test_value_net_ladder(kind, dtype):
    lstm = kind == "gaussian_lstm"
    # The eager twin's steps under XLA for the MLP in float32 and the LSTM in float64, with
    # jit_compile=False for the other two (XLA's compiles are about half of a case's time).
    xla = lstm == (dtype == "float64")
    report = run_value_ladder(kind, dtype, optimizers=("adam",) if lstm else ("adam", "sgd"),
                              fits=("before",) if lstm else ("after", "before"),
                              eager_config=None if xla else {"jit_compile": False})
    failed = [r for r in report.rows if not r.ok]
    assert not failed, "\n".join(f"{r.context} {r.rung} {r.item}: abs {r.max_abs:.3g} "
                                 f"rel {r.max_rel:.3g} {r.note}" for r in failed)
    assert {r.rung for r in report.rows} == RUNGS
    names = {r.item for r in report.rows if r.rung == "variables"}
    assert "value/head/kernel" in names
    if kind == "gaussian_lstm":
        assert "value/lstm/kernel" in names


def test_a_ladder_with_nothing_to_climb_is_refused():
    with pytest.raises(ValueError, match=r"optimizers \(\) and fits \('after',\) must each name"):
        run_value_ladder("categorical_mlp", "float64", optimizers=(), fits=("after",))
