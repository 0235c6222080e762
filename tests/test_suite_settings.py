"""The root ``conftest.py``: XLA's LLVM level 0 for test runs only, never for benchmarks,
and never over a level the user set; benchmark runs get the command line's process settings
(``process_tuning``), whose vector width depends on the CPU, so each test here names the CPU
it pretends to run on."""
from __future__ import annotations

import importlib.util
import os
from types import SimpleNamespace

import pytest

from pgtwin.mode_agnostic import process_tuning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _settings():
    spec = importlib.util.spec_from_file_location("suite_settings",
                                                  os.path.join(ROOT, "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(enable: bool, disable: bool):
    options = {"benchmark_enable": enable, "benchmark_disable": disable}
    return SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))


NARROW_CPU = ("GenuineIntel", frozenset({"avx2", "avx512f"}))
"""A CPU where ``process_tuning`` leaves XLA's vector width alone (no Intel CPU was measured)."""
WIDE_CPU = ("AuthenticAMD", frozenset({"avx2", "avx512f"}))
"""A CPU where ``process_tuning`` adds ``--xla_cpu_prefer_vector_width=512``."""


def _pretend_cpu(monkeypatch, cpu: tuple[str, frozenset[str]]) -> None:
    monkeypatch.setattr(process_tuning, "cpu_info", lambda path=process_tuning.CPUINFO: cpu)


@pytest.fixture
def settings(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("PGTWIN_TEST_ADDED_XLA_FLAG", raising=False)
    _pretend_cpu(monkeypatch, NARROW_CPU)
    return _settings()


def test_a_test_run_adds_level_0_after_the_users_flags(settings, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    settings.pytest_configure(_config(enable=False, disable=True))
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0"
    assert os.environ["PGTWIN_TEST_ADDED_XLA_FLAG"] == "1"


def test_a_level_the_user_set_is_kept(settings, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    settings.pytest_configure(_config(enable=False, disable=True))
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=3"
    assert "PGTWIN_TEST_ADDED_XLA_FLAG" not in os.environ


@pytest.mark.parametrize("enable,disable", [(True, True), (False, False)])
def test_a_benchmark_run_drops_the_suites_level_and_keeps_the_rest(settings, monkeypatch,
                                                                   enable, disable):
    # What a `pgtwin bench` child inherits from a test run: the suite's addition goes.
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0")
    monkeypatch.setenv("PGTWIN_TEST_ADDED_XLA_FLAG", "1")
    settings.pytest_configure(_config(enable=enable, disable=disable))
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    assert "PGTWIN_TEST_ADDED_XLA_FLAG" not in os.environ


def test_a_benchmark_run_keeps_a_level_the_user_set(settings, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    settings.pytest_configure(_config(enable=True, disable=False))
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=0"


def test_a_benchmark_run_on_a_wide_cpu_adds_the_width_after_the_users_flags(settings,
                                                                           monkeypatch):
    # The suite's level 0 goes, the user's dump flag stays, and the width comes last.
    _pretend_cpu(monkeypatch, WIDE_CPU)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_backend_optimization_level=0")
    monkeypatch.setenv("PGTWIN_TEST_ADDED_XLA_FLAG", "1")
    settings.pytest_configure(_config(enable=True, disable=False))
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_prefer_vector_width=512"


def test_a_benchmark_run_on_a_wide_cpu_keeps_a_width_the_user_set(settings, monkeypatch):
    _pretend_cpu(monkeypatch, WIDE_CPU)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=256")
    settings.pytest_configure(_config(enable=True, disable=False))
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=256"
