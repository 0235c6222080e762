"""Suite-wide settings, applied in ``pytest_configure``: before any test module imports
TensorFlow, in the main process and in every pytest-xdist worker, and inherited by the
subprocesses the tests start (``pgtwin train``, ``pgtwin parity``).

**XLA's CPU code generation at LLVM optimisation level 0 while benchmarks are disabled**
(the suite's default, ``setup.cfg``'s ``--benchmark-disable``). Compiling is about half the
time of the oracle and parity tests, and LLVM's optimisation of the generated code is a
large part of a compile (docs/benchmarks.md section 8 has what the level saves). What stays
the same: the HLO graph, XLA's own passes, its fusions and the order of its arithmetic. What
the tests then do not run is the machine code users get at the default level 3, which may
fuse a multiply and an add into one FMA where level 0 does not (a last-bit difference). The
tests hold compiled results to numpy oracles within tolerances far above one last bit, and
the twins to each other in one process, where both compile alike; the suite passed at both
levels when this was introduced. To run it on users' code:
``XLA_FLAGS=--xla_backend_optimization_level=3 python -m pytest ...`` (an ``XLA_FLAGS`` that
already sets the level is left as it is). Runs with ``--benchmark-enable`` (and so
``pgtwin bench``) time the default code: there the flag is never added, and a copy
inherited from a test run is removed.

**The command line's process settings in runs with ``--benchmark-enable``**
(``pgtwin/mode_agnostic/process_tuning.py``): TensorFlow's BFC CPU allocator, and XLA's
512-bit vectors on the CPUs where they were measured faster, so that timing runs measure
what a ``pgtwin train`` process pays (``TF_CPU_ALLOCATOR_USE_BFC=false`` in the environment
times glibc's malloc instead, ``XLA_FLAGS=--xla_cpu_prefer_vector_width=256`` XLA's default
width). The tests keep the library's defaults, what a user's own process has; a test that
calls the command line's ``main`` in-process leaves both variables as it found them.
"""
from __future__ import annotations

import os

import pytest

from benchmarks.run_mode import benchmarks_enabled
from pgtwin.mode_agnostic.cpu_allocator import ALLOCATOR_VARIABLE
from pgtwin.mode_agnostic.process_tuning import XLA_FLAGS_VARIABLE, tune_process

XLA_OPT_FLAG = "--xla_backend_optimization_level"
TEST_LEVEL = f"{XLA_OPT_FLAG}=0"
ADDED_MARK = "PGTWIN_TEST_ADDED_XLA_FLAG"
"""Set alongside the flag when this file added it, so that a benchmarking child process
(``pgtwin bench`` run from a test) can tell the suite's addition from a user's choice."""


def _without(flags: str, flag: str) -> str:
    return " ".join(part for part in flags.split() if part != flag)


def pytest_configure(config: pytest.Config) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if benchmarks_enabled(config):
        if os.environ.pop(ADDED_MARK, None):
            os.environ["XLA_FLAGS"] = _without(flags, TEST_LEVEL)
        tune_process()
        return
    if XLA_OPT_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {TEST_LEVEL}".strip()
        os.environ[ADDED_MARK] = "1"


@pytest.fixture(autouse=True)
def _process_tuning_stays_in_its_test(monkeypatch):
    """Restores ``TF_CPU_ALLOCATOR_USE_BFC`` and ``XLA_FLAGS`` after each test: the command
    line's ``main``, called in-process, tunes them for its own process's sake
    (``process_tuning.tune_process``), and the subprocesses of later tests must not inherit
    that."""
    for variable in (ALLOCATOR_VARIABLE, XLA_FLAGS_VARIABLE):
        value = os.environ.get(variable)
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
