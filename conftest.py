"""Test-session hooks for the whole repository (tests/, parity_tests/, benchmarks/)."""
from __future__ import annotations


def pytest_collection_modifyitems(config, items) -> None:
    """Files that hold a test marked ``slow`` run first, each file's tests in their order.

    Under the README's ``pytest -n auto --dist loadfile --no-loadscope-reorder`` the
    workers are handed whole files in this order, so the long files (distributed runs,
    SIGKILL-and-resume, the LSTM parity ladders) start at once instead of one of them
    starting last and running alone while the other workers idle.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: keeps each file's order
