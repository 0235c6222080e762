"""The twin ladder, rungs 1-5, for every policy kind and dtype (``pgtwin.parity.twin_parity``).

Both twins are built from the same spec and weights and fed one fixed batch collected from
a fixed seed. Each rung's test fails with the per-variable (or per-output) max abs and max
relative errors of that rung. Rung 6 (training runs) is in ``test_training_parity.py``.
"""
from __future__ import annotations

import pytest

from pgtwin.parity.ladder import TWIN_RUNGS
from pgtwin.parity.twin_parity import LADDER_OPTIMIZERS, POLICY_KINDS, RTOL, run_ladder

FIXED_RUNGS = TWIN_RUNGS[:5]
kinds = pytest.mark.parametrize("kind", tuple(POLICY_KINDS))
dtypes = pytest.mark.parametrize("dtype", ("float32", "float64"))


def without_xla(kind: str, dtype: str) -> dict | None:
    """Both twins at ``jit_compile=False`` for half the kinds of each dtype, each kind in
    one dtype; XLA (the default) for the rest. XLA's compiles are about half of a case's
    time. Both twins, not the eager one alone: the natural step's conjugate gradient turns
    the last-bit differences between XLA's kernels and TF's into weights ~50 % apart after
    five steps (docs/continuous.md), so its rung holds only between twins compiled alike."""
    xla = (list(POLICY_KINDS).index(kind) + ("float32", "float64").index(dtype)) % 2 == 0
    return None if xla else {"jit_compile": False}


def optimizers(kind: str, dtype: str) -> tuple[str, ...]:
    """Rung 5's optimizers: all three, but for the float64 LSTM no natural step. Its natural
    steps are ``parity_tests/test_natural_parity.py``'s LSTM case (float64, XLA, three
    updates); here they were a third of the ladder's slowest case (15 of 33 s: the LSTM's
    per-sample scores compiled in both twins for one pair)."""
    if (kind, dtype) == ("gaussian_lstm", "float64"):
        return tuple(o for o in LADDER_OPTIMIZERS if o != "natural")
    return LADDER_OPTIMIZERS


@pytest.fixture(scope="module")
def ladder():
    """``ladder(kind, dtype)``: the rungs 1-5 report, run once per module."""
    reports = {}

    def get(kind, dtype):
        if (kind, dtype) not in reports:
            reports[kind, dtype] = run_ladder(kind, dtype, rungs=FIXED_RUNGS,
                                              config_changes=without_xla(kind, dtype),
                                              optimizers=optimizers(kind, dtype))
        return reports[kind, dtype]

    return get


def _rows(report, rung):
    return [r for r in report.rows if r.rung == rung]


def _explain(rows) -> str:
    return "\n".join(f"  {r.context} {r.item}: max abs {r.max_abs:.3e}, max rel {r.max_rel:.3e}"
                     f" {'ok' if r.ok else 'FAIL'} {r.note}" for r in rows)


@kinds
@dtypes
def test_rung1_same_variables(ladder, kind, dtype):
    rows = _rows(ladder(kind, dtype), "variables")
    names = list(POLICY_KINDS[kind].spec().weight_shapes())
    assert [r.item for r in rows] == names, _explain(rows)
    # Same canonical and TF names, shapes and dtypes, and bit-identical initial values.
    assert all(r.ok and r.max_abs == 0.0 for r in rows), _explain(rows)


@kinds
@dtypes
def test_rung2_same_distribution_parameters_and_log_probs(ladder, kind, dtype):
    rows = _rows(ladder(kind, dtype), "outputs")
    assert [r.item for r in rows] == ["dist_params", "log_prob"]
    assert all(r.ok and r.max_rel <= RTOL[dtype] for r in rows), _explain(rows)


@kinds
@dtypes
def test_rung3_same_loss(ladder, kind, dtype):
    rows = _rows(ladder(kind, dtype), "loss")
    assert [r.item for r in rows] == ["loss"]
    assert rows[0].ok and rows[0].max_rel <= RTOL[dtype], _explain(rows)


@kinds
@dtypes
def test_rung4_same_gradients(ladder, kind, dtype):
    # float64: max relative error <= 1e-9 per variable; float32: <= 1e-4.
    rows = _rows(ladder(kind, dtype), "gradients")
    assert [r.item for r in rows] == list(POLICY_KINDS[kind].spec().weight_shapes())
    assert all(r.ok and r.max_rel <= RTOL[dtype] for r in rows), _explain(rows)


@pytest.mark.parametrize("kind,dtype,optimizer", [
    (k, d, o) for d in ("float32", "float64") for k in POLICY_KINDS for o in optimizers(k, d)])
def test_rung5_same_weights_after_five_optimizer_steps(ladder, kind, dtype, optimizer):
    # natural: five natural-gradient steps (natural_kl 0.01; pgtwin_core.natural_gradient).
    rows = [r for r in _rows(ladder(kind, dtype), "weights")
            if r.context == f"{kind}/{dtype}/{optimizer}"]
    names = list(POLICY_KINDS[kind].spec().weight_shapes())
    assert [r.item for r in rows if not r.item.startswith("metric")] == names
    assert len(rows) == len(names) + 3  # + loss, grad_norm, entropy over the 5 steps
    assert all(r.ok for r in rows), _explain(rows)


def test_rung5_steps_with_the_optimizers_asked_for_only(ladder):
    contexts = {r.context for r in _rows(ladder("gaussian_lstm", "float64"), "weights")}
    assert contexts == {"gaussian_lstm/float64/adam", "gaussian_lstm/float64/sgd"}


# ------------------------------------------------------- the ladder can part
def test_ladder_parts_at_the_weights_rung_when_adam_epsilon_differs():
    # Keras Adam's default epsilon (1e-7) against TF1's (1e-8): the classic migration slip.
    # Forward pass, loss and gradients agree; the Adam steps do not; SGD is unaffected.
    report = run_ladder("categorical_mlp", "float64", rungs=FIXED_RUNGS,
                        eager_config={"adam_epsilon": 1e-7})
    first = report.first_failure
    assert (first.rung, first.context) == ("weights", "categorical_mlp/float64/adam")
    assert all(r.ok for r in report.rows if r.rung != "weights"), report.to_table()
    assert all(r.ok for r in report.rows if r.context.endswith("/sgd")), report.to_table()
    assert report.summary().startswith("parity FAILED at rung 'weights'")


def test_ladder_parts_at_the_loss_rung_when_the_entropy_bonus_differs():
    report = run_ladder("gaussian_sigmoid_mlp", "float64", rungs=FIXED_RUNGS[:4],
                        eager_config={"entropy_coef": 0.02})
    first = report.first_failure
    assert (first.rung, first.item) == ("loss", "loss")
    assert all(r.ok for r in report.rows if r.rung in ("variables", "outputs"))
    assert not all(r.ok for r in report.rows if r.rung == "gradients")


@pytest.mark.parametrize("kwargs, message", [
    (dict(policy_kind="mlp", dtype="float64"), r"unknown policy kind 'mlp': choose one of"),
    (dict(policy_kind="categorical_mlp", dtype="float16"), r"dtype 'float16' is not one of"),
    (dict(policy_kind="categorical_mlp", dtype="float64", rungs=("forward",)),
     r"unknown rung\(s\) \['forward'\]"),
    (dict(policy_kind="categorical_mlp", dtype="float64", optimizers=("adam", "rmsprop")),
     r"optimizers \('adam', 'rmsprop'\): rung 'weights' needs one or more of \('adam'"),
    (dict(policy_kind="categorical_mlp", dtype="float64", optimizers=()),
     r"optimizers \(\): rung 'weights' needs one or more of"),
])
def test_run_ladder_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_ladder(**kwargs)
