"""``pgtwin compare``: exit codes, table and JSON, and the setup errors' messages."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pgtwin.cli import main
from tests import user_programs as up

PROGRAMS = "tests.user_programs"


@pytest.fixture()
def batch_file(tmp_path):
    path = tmp_path / "batch.npz"
    np.savez(path, **up.make_batch())
    return str(path)


def run(capsys, *args):
    code = main(["compare", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_faithful_migration_exits_0_with_the_mapping_and_the_table(capsys, batch_file):
    code, out, _ = run(capsys, "--tf1", f"{PROGRAMS}:tf1_program", "--tf2",
                       f"{PROGRAMS}:tf2_program", "--inputs", batch_file, "--steps", "2")
    assert code == 0, out
    assert "policy/fc1/weights" in out.splitlines()[2]  # the mapping table comes first
    assert out.strip().splitlines()[-1].startswith("parity OK")


def test_a_wrong_migration_exits_1_and_json_names_the_rung(capsys, batch_file):
    code, out, _ = run(capsys, "--tf1", f"{PROGRAMS}:tf1_program", "--tf2",
                       f"{PROGRAMS}:tf2_keras_epsilon", "--inputs", batch_file, "--json")
    assert code == 1
    report = json.loads(out)
    assert not report["ok"] and "optimizer.epsilon" in report["summary"]
    assert "creation order and shape" in report["mapping"]
    # The same pairing as records: every TF1 weight of the program once, with its partner.
    trained = [p for p in report["pairs"] if p["role"] == "trained"]
    assert {p["tf1"] for p in trained} >= {"policy/fc1/weights"}
    fc1 = next(p for p in trained if p["tf1"] == "policy/fc1/weights")
    assert fc1["tf1_shape"] == fc1["tf2_shape"] and fc1["tf2"] and fc1["paired_by"]
    assert not any("unpaired" in p for p in report["pairs"])


def test_float64_reaches_factories_that_take_a_dtype(capsys, batch_file):
    code, out, _ = run(capsys, "--tf1", f"{PROGRAMS}:tf1_program", "--tf2",
                       f"{PROGRAMS}:tf2_program", "--inputs", batch_file, "--dtype", "float64",
                       "--steps", "1")
    assert code == 0, out
    assert "float64" in out


@pytest.mark.parametrize("spec, message", [
    ("tests.user_programs", "is not MODULE:FACTORY"),
    ("tests.no_such_module:tf1", "no module named 'tests.no_such_module'"),
    ("tests.user_programs:nothing", "has no attribute 'nothing'"),
    ("tests.user_programs:tf2_program", "it must return a TF1Program"),
    ("tests.user_programs:tf1_that_raises", "calling tf1_that_raises() raised KeyError: "
                                            "'no float32 checkpoint for the policy'"),
])
def test_a_bad_factory_exits_2_naming_it(capsys, batch_file, spec, message):
    code, _, err = run(capsys, "--tf1", spec, "--tf2", f"{PROGRAMS}:tf2_program",
                       "--inputs", batch_file)
    assert code == 2 and message in err and "--tf1" in err


def test_a_missing_inputs_file_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--tf1", "a:b", "--tf2", "c:d", "--inputs", "/nonexistent.npz"])
    assert exit_.value.code == 2
    assert "no file '/nonexistent.npz'" in capsys.readouterr().err


def test_a_module_that_switches_eager_off_at_import_is_refused_at_its_line(batch_file):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, "-m", "pgtwin", "compare", "--tf1",
         "tests.compare_cases.switches_eager_off:tf1", "--tf2", f"{PROGRAMS}:tf2_program",
         "--inputs", batch_file], capture_output=True, text=True, env=env, timeout=300,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 2, proc.stderr
    assert "switches_eager_off.py:5 calls tf.compat.v1.disable_v2_behavior()" in proc.stderr
    assert "delete the line" in proc.stderr


def test_a_failure_inside_pgtwin_exits_3_not_1_and_json_says_so(capsys, batch_file,
                                                                  monkeypatch):
    # Exit 1 means "they part": a crash of the harness itself must not read as that.
    def broken(*args, **kwargs):
        raise RuntimeError("an internal step failed")

    monkeypatch.setattr("pgtwin.parity.code_parity.compare_programs", broken)
    code, out, err = run(capsys, "--tf1", f"{PROGRAMS}:tf1_program", "--tf2",
                         f"{PROGRAMS}:tf2_program", "--inputs", batch_file, "--json")
    assert code == 3
    assert "Traceback" in err and "internal error, a bug in pgtwin" in err
    assert json.loads(out) == {"ok": False, "exit": 3, "error": (
        "internal error, a bug in pgtwin (the traceback is above; please report it): "
        "RuntimeError: an internal step failed")}


def test_a_setup_error_under_json_is_json_too(capsys, batch_file):
    code, out, err = run(capsys, "--tf1", "tests.user_programs:nothing", "--tf2",
                         f"{PROGRAMS}:tf2_program", "--inputs", batch_file, "--json")
    report = json.loads(out)
    assert code == 2 and report["exit"] == 2 and not report["ok"]
    assert "has no attribute 'nothing'" in report["error"] and report["error"] in err



def test_under_tf_use_legacy_keras_a_tf_keras_port_gets_a_row_that_says_so(
        capsys, monkeypatch):
    # A port written with tf.keras passed as tf_keras' under --legacy-keras, and nothing
    # said so: its converted checkpoint then failed to restore into Keras 3's optimizer.
    # A Keras 3 port (import keras) gets no such row.
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    examples = "examples.tf1_notebook"
    batch = os.path.join(os.path.dirname(__file__), "..", "examples", "tf1_notebook",
                         "batch.npz")
    code, out, _ = run(capsys, "--tf1", f"{examples}.programs:tf1", "--tf2",
                       f"{examples}.programs:tf2_tf_keras", "--inputs", batch, "--steps", "1")
    assert code == 0, out
    [row] = [line for line in out.splitlines() if " tf_keras " in line]
    assert "pass (the TF2 side's Sequential, Adam are tf_keras': TF_USE_LEGACY_KERAS=1" in row
    code, out, _ = run(capsys, "--tf1", f"{examples}.programs:tf1", "--tf2",
                       f"{examples}.programs:tf2", "--inputs", batch, "--steps", "1")
    assert code == 0 and " tf_keras " not in out, out
