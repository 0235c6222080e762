"""``pgtwin parity``: table and JSON output, exit codes, which ladders it runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pgtwin.parity import twin_parity, value_parity
from pgtwin.cli import main
from pgtwin.parity.ladder import TWIN_RUNGS, ParityReport, Row

FIXED_RUNGS = TWIN_RUNGS[:5]
ONE = ["parity", "--policy", "categorical_mlp", "--dtype", "float64", "--skip-training"]


def _strict_json(text):
    """``json.loads`` refusing NaN and Infinity, which are not JSON."""
    def refuse(token):
        raise ValueError(f"not JSON: {token}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def reports():
    """Real rungs 1-5 reports of categorical_mlp/float64: the twins as they are, and with the
    eager twin on Keras' default Adam epsilon (which parts at the weights rung; stepped with
    Adam only, the one optimizer the epsilon touches)."""
    return {"same": twin_parity.run_ladder("categorical_mlp", "float64", rungs=FIXED_RUNGS),
            "epsilon": twin_parity.run_ladder("categorical_mlp", "float64", rungs=FIXED_RUNGS,
                                              eager_config={"adam_epsilon": 1e-7},
                                              optimizers=("adam",))}


def _serve(monkeypatch, report, calls=None):
    def fake_run_ladder(kind, dtype, **kwargs):
        if calls is not None:
            calls.append((kind, dtype, kwargs["rungs"]))
        return report
    monkeypatch.setattr(twin_parity, "run_ladder", fake_run_ladder)


def test_json_has_one_row_per_rung_and_exit_code_0(reports, monkeypatch, capsys):
    _serve(monkeypatch, reports["same"])
    assert main(ONE + ["--json"]) == 0
    out = _strict_json(capsys.readouterr().out)
    assert out["ok"] is True
    assert [r["rung"] for r in out["rows"]] == list(FIXED_RUNGS)
    for row in out["rows"]:
        assert {"policy", "dtype", "rung", "max_abs", "max_rel", "ok"} <= set(row)
        assert (row["policy"], row["dtype"], row["ok"]) == ("categorical_mlp", "float64", True)
    # Each rung's row carries the worst error over its items.
    for row in out["rows"]:
        items = [r for r in reports["same"].rows if r.rung == row["rung"]]
        assert row["max_rel"] == max(r.max_rel for r in items)
        assert row["max_abs"] == max(r.max_abs for r in items)


def test_table_lists_every_rung_with_its_errors(reports, monkeypatch, capsys):
    _serve(monkeypatch, reports["same"])
    assert main(ONE) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["policy", "dtype", "rung", "max_abs", "max_rel", "result"]
    body = [line.split() for line in lines[2:2 + len(FIXED_RUNGS)]]
    assert [row[2] for row in body] == list(FIXED_RUNGS)
    assert all(row[5] == "pass" for row in body)
    assert lines[-1] == "parity OK"


def test_a_failing_rung_exits_1_and_says_where(reports, monkeypatch, capsys):
    _serve(monkeypatch, reports["epsilon"])
    assert main(ONE + ["--json"]) == 1
    out = _strict_json(capsys.readouterr().out)
    assert out["ok"] is False
    verdicts = {r["rung"]: r["ok"] for r in out["rows"]}
    assert verdicts == {"variables": True, "outputs": True, "loss": True, "gradients": True,
                        "weights": False}
    assert main(ONE) == 1
    text = capsys.readouterr().out
    assert "parity FAILED at rung 'weights'" in text
    assert text.splitlines()[-1] == "parity FAILED"


def test_infinite_errors_are_null_in_json(monkeypatch, capsys):
    row = Row("variables", "policy/head/bias", np.inf, np.inf, False, "shapes differ", "x")
    _serve(monkeypatch, ParityReport([row]))
    assert main(ONE + ["--json"]) == 1
    out = _strict_json(capsys.readouterr().out)
    assert out["rows"][0]["max_abs"] is None and out["rows"][0]["note"] == "shapes differ"


def test_default_runs_every_policy_kind_in_both_dtypes(monkeypatch, capsys):
    calls = []
    _serve(monkeypatch, ParityReport(), calls)
    assert main(["parity", "--json"]) == 0
    capsys.readouterr()
    assert [(k, d) for k, d, _ in calls] == [(k, d) for k in twin_parity.POLICY_KINDS
                                             for d in ("float32", "float64")]
    assert all(rungs == TWIN_RUNGS for _, _, rungs in calls)
    calls.clear()
    assert main(["parity", "--dtype", "float32", "--skip-training"]) == 0
    assert {d for _, d, _ in calls} == {"float32"}
    assert all(rungs == FIXED_RUNGS for _, _, rungs in calls)


def test_unknown_policy_kind_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as err:
        main(["parity", "--policy", "transformer"])
    assert err.value.code == 2
    assert "unknown kind(s) ['transformer']" in capsys.readouterr().err


def test_console_entry_point_end_to_end():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-m", "pgtwin", *ONE, "--json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = _strict_json(proc.stdout)
    assert out["ok"] is True and len(out["rows"]) == len(FIXED_RUNGS)
    assert "pgtwin parity: categorical_mlp float64: ok" in proc.stderr


def test_value_flag_adds_the_value_nets_rows(reports, monkeypatch, capsys):
    # The value ladder is real (categorical_mlp, float64), climbed with SGD and fit-after
    # only (every rung still has rows; the whole ladder is parity_tests/test_value_parity.py);
    # the policy ladder is served.
    _serve(monkeypatch, reports["same"])
    real, calls = value_parity.run_value_ladder, []

    def smaller_value_ladder(kind, dtype, **kwargs):
        calls.append((kind, dtype, kwargs))
        return real(kind, dtype, optimizers=("sgd",), fits=("after",), **kwargs)
    monkeypatch.setattr(value_parity, "run_value_ladder", smaller_value_ladder)
    assert main(ONE + ["--value", "--json"]) == 0
    assert calls == [("categorical_mlp", "float64", {"seed": 0})]
    rows = _strict_json(capsys.readouterr().out)["rows"]
    value = [r for r in rows if r["policy"] == "categorical_mlp+value"]
    assert [r["rung"] for r in value] == list(TWIN_RUNGS)
    assert all(r["ok"] for r in value)
    assert any("value/" in r["worst"] for r in value)


def test_a_row_with_non_finite_values_names_the_side_that_holds_them():
    from pgtwin.parity.ladder import compare_arrays
    # Both NaN: max_abs is NaN and max_rel 0, which alone say nothing of where.
    both = compare_arrays("gradients", "w", np.full((2, 2), np.nan), np.full((2, 2), np.nan),
                          1e-5, 1e-6)
    assert not both.ok
    assert both.note == ("non-finite values: TF1 holds 4 non-finite of 4 (first [0, 0] = nan); "
                         "TF2 holds 4 non-finite of 4 (first [0, 0] = nan)")
    one = compare_arrays("gradients", "w", np.array([1.0, np.inf]), np.array([1.0, 2.0]), 1e-5,
                         sides=("the graph twin", "the eager twin"))
    assert one.note == ("non-finite values: the graph twin holds 1 non-finite of 2 (first [1] "
                        "= inf); the eager twin none")
    assert compare_arrays("loss", "l", np.array(1.0), np.array(1.0), 0.0).note == ""


def test_a_negative_seed_is_a_usage_error_naming_the_flag(capsys):
    # It reached init_weights and ended in numpy's traceback ("expected non-negative integer").
    with pytest.raises(SystemExit) as exit_info:
        main(["parity", "--seed", "-5", "--skip-training"])
    assert exit_info.value.code == 2
    assert "argument --seed: must be an integer >= 0" in capsys.readouterr().err
