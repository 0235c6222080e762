"""``pgtwin bench``: ratios, tables and files from pytest-benchmark's JSON, and one real run.

The table logic is checked on a hand-written pytest-benchmark document whose ratios are
worked out by hand; the end-to-end test runs two real benchmarks (quick mode) through the
child pytest and checks the files it writes. No timing is asserted anywhere.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pgtwin.measure import bench
from pgtwin.cli import main


def _bench(group, name, median, info, **stats):
    return {"group": group, "name": name, "extra_info": info,
            "stats": {"median": median, "min": stats.get("min", median * 0.9),
                      "iqr": stats.get("iqr", 0.0), "rounds": stats.get("rounds", 5)}}


# Group "update": graph 2.0 ms, eager 6.0 ms, function 2.2 ms -> ratios 1, 3, 1.1.
# Group "rollout": function listed before graph; graph 10 ms for 2048 env steps
#   -> 204,800 env-steps/s; function 8 ms -> ratio 0.8 and 256,000 env-steps/s.
# Group "paths": no graph variant, two entries of impl "eager" -> the first is the reference;
#   cached 30 ms / recompute 20 ms = 1.5.
DOC = {"benchmarks": [
    _bench("update", "test_update[graph]", 2.0e-3, {"variant": "graph", "label": "TF1"}),
    _bench("update", "test_update[eager]", 6.0e-3, {"variant": "eager", "label": "eager"}),
    _bench("update", "test_update[function]", 2.2e-3, {"variant": "function", "label": "fn"}),
    _bench("rollout", "test_it[function]", 8.0e-3,
           {"variant": "function", "label": "fn", "env_steps": 2048}),
    _bench("rollout", "test_it[graph]", 10.0e-3,
           {"variant": "graph", "label": "TF1", "env_steps": 2048}),
    _bench("paths", "test_paths[recompute]", 20e-3, {"impl": "eager", "update_path": "recompute"}),
    _bench("paths", "test_paths[cached]", 30e-3, {"impl": "eager", "update_path": "cached"}),
]}


def test_figures_ratios_against_the_graph_twin_by_hand():
    figs = {(f.group, f.name): f for f in bench.figures(DOC)}
    assert figs["update", "TF1"].ratio == 1.0
    assert figs["update", "eager"].ratio == pytest.approx(3.0)
    assert figs["update", "fn"].ratio == pytest.approx(1.1)
    assert figs["rollout", "TF1"].ratio == 1.0
    assert figs["rollout", "fn"].ratio == pytest.approx(0.8)
    assert figs["rollout", "TF1"].env_steps_per_s == pytest.approx(204_800)
    assert figs["rollout", "fn"].env_steps_per_s == pytest.approx(256_000)
    assert figs["update", "fn"].env_steps_per_s is None
    assert figs["paths", "test_paths[recompute]"].ratio == 1.0
    assert figs["paths", "test_paths[cached]"].ratio == pytest.approx(1.5)
    assert {f.reference for f in figs.values() if f.group != "paths"} == {"TF1"}


def test_figures_keep_group_order_and_put_the_reference_first():
    names = [(f.group, f.name) for f in bench.figures(DOC)]
    assert names[:5] == [("update", "TF1"), ("update", "eager"), ("update", "fn"),
                         ("rollout", "TF1"), ("rollout", "fn")]


def test_tables_text_and_markdown():
    figs = bench.figures(DOC)
    text = bench.tables(figs)
    assert text.splitlines()[0] == "update"
    assert "ratio to TF1" in text and "env-steps/s" in text
    row = next(line for line in text.splitlines() if line.startswith("eager "))
    assert row.split()[-3:] == ["6", "ms", "3.00"]
    assert "204,800" in text and "256,000" in text
    md = bench.tables(figs, markdown=True)
    assert "**update**" in md and "| TF1 | 2 ms | 1.00 |" in md
    assert "| fn | 8 ms | 0.80 | 256,000 |" in md


@pytest.mark.parametrize("seconds,text", [(2.5, "2.5 s"), (1.234e-3, "1.23 ms"),
                                          (9.26e-5, "92.6 us"), (1.0, "1 s")])
def test_format_seconds(seconds, text):
    assert bench.format_seconds(seconds) == text


def test_machine_info_names_cpu_cores_and_versions():
    info = bench.machine_info()
    assert info["cores"] == os.cpu_count()
    assert info["numpy"] == np.__version__
    assert info["cpu"]
    line = bench.machine_line(info)
    assert f"{os.cpu_count()} cores" in line and f"numpy {np.__version__}" in line


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_machine_record_names_the_cpu_allocator(value, monkeypatch):
    # Large per-sample arrays cost 4-5x more under malloc than under BFC (docs/benchmarks.md
    # section 3), so a figure is read with the allocator it was taken under.
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", value)
    info = bench.machine_info()
    assert info["tf_cpu_allocator_use_bfc"] == value
    assert bench.machine_line(info).endswith(f"; TF_CPU_ALLOCATOR_USE_BFC={value}")


def test_plot_rejects_a_file_that_is_not_png(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--quick", "--plot", "ratios.svg"])
    assert exit_info.value.code == 2
    assert "--plot: expected a .png file name, got 'ratios.svg'" in capsys.readouterr().err


def test_the_child_pytest_does_not_inherit_an_xdist_worker(monkeypatch):
    # Under `pytest -n 2` the test process is an xdist worker; pytest-benchmark in a child
    # that sees PYTEST_XDIST_WORKER disables itself and writes no JSON.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("PGTWIN_SOMETHING_ELSE", "kept")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    env = bench.child_environment()
    assert "PYTEST_XDIST_WORKER" not in env and "PYTEST_XDIST_WORKER_COUNT" not in env
    assert env["PGTWIN_SOMETHING_ELSE"] == "kept"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "2"


@pytest.mark.slow
def test_bench_end_to_end_quick(tmp_path, capsys):
    out_json, out_png, out_md = (str(tmp_path / n) for n in ("b.json", "b.png", "b.md"))
    code = main(["bench", "--quick", "-k", "test_policy_step and (graph-1 or function-1)",
                 "--json", out_json, "--plot", out_png, "--markdown", out_md])
    captured = capsys.readouterr()
    stdout = captured.out
    assert code == 0
    with open(out_json) as f:
        doc = json.load(f)
    figs = doc["figures"]
    assert {f["group"] for f in figs} == {"policy step: 1 obs (CartPole-v1)"}
    by_variant = {f["extra"]["variant"]: f for f in figs}
    assert set(by_variant) == {"graph", "function"}
    assert by_variant["graph"]["ratio"] == 1.0
    assert by_variant["function"]["ratio"] == pytest.approx(
        by_variant["function"]["median_s"] / by_variant["graph"]["median_s"])
    assert doc["command"].startswith("pgtwin bench --quick -k ")
    assert doc["machine"]["cores"] == os.cpu_count()
    assert "policy step: 1 obs (CartPole-v1)" in stdout and "cores" in stdout
    err = captured.err
    assert "[1] test_policy_step.py: 2 benchmarks in " in err, err
    with open(out_png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(out_md) as f:
        assert "| TF1 Session (legacy_graph) |" in f.read()


@pytest.mark.slow
def test_bench_without_a_match_fails_with_a_message(capsys):
    # a selection that matches nothing is the user's input: exit 2, with where to look
    assert main(["bench", "--quick", "-k", "no_such_benchmark_xyz"]) == 2
    err = capsys.readouterr().err
    assert "no benchmark matched (pytest -k 'no_such_benchmark_xyz')" in err
    assert "--collect-only -q" in err


@pytest.mark.slow
def test_a_bad_k_expression_says_pytests_reason_without_its_session_header(capsys):
    # It printed pytest's whole session header first and its reason last, and exited 1.
    assert main(["bench", "--quick", "-k", "test_iteration and ("]) == 2
    err = capsys.readouterr().err
    assert "-k 'test_iteration and (': pytest refused the selection: ERROR: Wrong expression" \
        in err, err
    assert "test session starts" not in err and "platform linux" not in err, err


def test_suite_progress_says_a_line_per_suite_file():
    # Hand-made ``pytest -v`` lines; a clock that advances 10 s per reading.
    ticks = iter(range(0, 1000, 10))
    said = []
    tracker = bench.SuiteProgress(said.append, files=4, clock=lambda: next(ticks))
    for line in ["collecting ... collected 4 items / 1 skipped",
                 "benchmarks/test_update.py::test_update[graph-256] PASSED    [ 25%]",
                 "benchmarks/test_update.py::test_update[eager-256] PASSED    [ 50%]",
                 "benchmarks/test_policy_step.py::test_policy_step[graph-1] PASSED [ 75%]",
                 "benchmarks/test_per_sample.py::test_jax_group[32] SKIPPED (no jax) [100%]",
                 "---- benchmark: 3 tests ----"]:
        tracker.line(line)
    tracker.finish()
    # of 4 files one was skipped at collection (JAX absent): the count goes to [3/3], and a
    # file whose tests were all skipped says so
    assert said == ["[1/3] test_update.py: 2 benchmarks in 10.0 s",
                    "[2/3] test_policy_step.py: 1 benchmarks in 10.0 s",
                    "[3/3] test_per_sample.py: 0 benchmarks, 1 skipped in 10.0 s"]


def test_quick_mode_says_the_time_it_takes(capsys):
    assert "589 s measured" in bench.QUICK_ESTIMATE
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--quick" in help_text and "about a minute" not in help_text


@pytest.mark.parametrize("flag, where, message", [
    ("--json", "missing/dir/b.json", "does not exist or is not a directory; create it first"),
    ("--markdown", ".", "is a directory; give a file name in it"),
    ("--plot", "afile/x.png", "does not exist or is not a directory"),
])
def test_output_paths_are_refused_before_anything_is_measured(tmp_path, capsys, monkeypatch,
                                                              flag, where, message):
    # They were opened after the run: --quick's minutes lost, then a traceback.
    (tmp_path / "afile").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "run_suites", lambda *a, **k: pytest.fail("ran the suites"))
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--quick", "-k", "policy_step", flag, where])
    assert exit_info.value.code == 2
    assert f"argument {flag}: " in (err := capsys.readouterr().err) and message in err, err
