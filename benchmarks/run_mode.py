"""Whether a pytest run times its benchmarks, read from pytest-benchmark's options.

``setup.cfg`` passes ``--benchmark-disable`` (each benchmark body runs once, as a test);
``--benchmark-enable`` overrides it (``pgtwin bench``). The root ``conftest.py`` (XLA's
level for test runs) and ``benchmarks/conftest.py`` (which batch sizes run) both ask this.
"""
from __future__ import annotations

import pytest


def benchmarks_enabled(config: pytest.Config) -> bool:
    """True when pytest-benchmark times: enabled, or not disabled."""
    return bool(config.getoption("benchmark_enable", False)) or not config.getoption(
        "benchmark_disable", False)
