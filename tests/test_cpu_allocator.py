"""TensorFlow's CPU allocator and large per-sample arrays (``pgtwin/mode_agnostic/cpu_allocator.py``).

The cause, checked on the process itself: under glibc's malloc a 32 MiB per-sample buffer is
mapped afresh on every call, so each call takes one minor page fault per 4 KiB page
(32 MiB / 4 KiB = 8,192), and under TensorFlow's BFC allocator it takes next to none. Where
TensorFlow turns oneDNN on (x86 CPUs with AVX-512 VNNI or AMX), its CPU tensors do not come
from malloc at all, so the malloc case runs with ``TF_ENABLE_ONEDNN_OPTS=0``, and the
machine's own default is checked against what the warning goes by. Then the twins'
one-time warning, and the command line's default.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec
from pgtwin.cli import main
from pgtwin.mode_agnostic import cpu_allocator
from pgtwin.mode_agnostic.cpu_allocator import (ALLOCATOR_VARIABLE, FRESH_PAGES_BYTES,
                                                FreshPagesWarning, fresh_pages_message)
from pgtwin.twins import agent_class

from tests.per_sample_cases import random_inputs, random_weights

# A 1024 x 1024 kernel is 4 MiB per sample in float32: 8 rows fill glibc's 32 MiB cap.
WIDE = PolicySpec("categorical", (4,), 2, hidden=(1024, 1024))
PAGES_PER_BUFFER = FRESH_PAGES_BYTES // 4096

FAULTS_SCRIPT = """
import json, os, resource, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import PolicySpec
from pgtwin.mode_agnostic.cpu_allocator import remaps_large_buffers
from pgtwin.twins import agent_class
from tests.per_sample_cases import random_inputs, random_weights
spec = PolicySpec("categorical", (4,), 2, hidden=(1024, 1024))
agent = agent_class(sys.argv[1])(spec, ReinforceConfig(), weights=random_weights(spec))
obs, actions = random_inputs(spec, 8)
for _ in range(3):
    agent.per_sample_gradients(obs, actions, "analytic")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    agent.per_sample_gradients(obs, actions, "analytic")
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10
print(json.dumps({"faults": faults, "remaps": remaps_large_buffers()}))
"""


ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def _run_faults(twin: str, bfc: str | None, onednn: str | None = "0") -> dict:
    """The FAULTS_SCRIPT's figures in a fresh process; ``None`` leaves a variable unset
    (TensorFlow's default for this machine)."""
    env = {k: v for k, v in os.environ.items() if k not in (ALLOCATOR_VARIABLE, ONEDNN_VARIABLE)}
    for name, value in ((ALLOCATOR_VARIABLE, bfc), (ONEDNN_VARIABLE, onednn)):
        if value is not None:
            env[name] = value
    out = subprocess.run([sys.executable, "-c", FAULTS_SCRIPT, twin], env=env, check=True,
                         capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__))))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _huge_pages_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc is the cause")
@pytest.mark.parametrize("twin", ["graph", "eager"])
def test_malloc_maps_the_buffer_again_each_call_and_bfc_reuses_it(twin):
    default, bfc = _run_faults(twin, None), _run_faults(twin, "true")
    # malloc: at least the buffer's 8,192 pages a call (2 MiB pages: at least 16).
    least = _least_faults()
    assert default["faults"] >= least, default
    assert bfc["faults"] < least / 2, bfc
    # What the warning goes by agrees with what the kernel counted.
    assert default["remaps"] is True and bfc["remaps"] is False


def _least_faults() -> int:
    """Page faults a call of a buffer mapped afresh takes at least: 8,192 pages of 4 KiB, or
    16 of 2 MiB where transparent huge pages are always on (RHEL's default). A call whose
    buffer is reused takes fewer than half that: the script's other allocations measured
    6.4-6.5 faults a call (4 KiB pages, BFC or oneDNN's allocator)."""
    return 16 if _huge_pages_always() else PAGES_PER_BUFFER


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc is the cause")
def test_the_warning_agrees_with_this_machines_default_allocator():
    # No variable set: malloc, or oneDNN's allocator where TensorFlow turns oneDNN on.
    own = _run_faults("graph", None, onednn=None)
    least = _least_faults()
    assert (own["faults"] >= least) if own["remaps"] else (own["faults"] < least / 2), own


def test_the_message_gives_the_array_then_the_cause_then_the_fix():
    text = fresh_pages_message("policy/dense_1/kernel", np.zeros((8, 1024, 1024), np.float32))
    assert "'policy/dense_1/kernel'" in text and "32.0 MiB" in text
    assert "[8, 1024, 1024] float32" in text
    cause, fix = text.index("glibc's malloc"), text.index(f"Set {ALLOCATOR_VARIABLE}=true")
    assert text.index("32.0 MiB") < cause < fix


@pytest.mark.parametrize("twin", ["graph", "eager"])
def test_the_twins_warn_once_about_a_buffer_mapped_again_each_call(twin, monkeypatch):
    monkeypatch.setattr(cpu_allocator, "_warned", False)
    monkeypatch.setattr(cpu_allocator, "remaps_large_buffers", lambda: True)
    agent = agent_class(twin)(WIDE, ReinforceConfig(jit_compile=False),
                              weights=random_weights(WIDE))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # 4 rows: a 16 MiB buffer, under the cap; 6 rows pad to a bucket of 8: 32 MiB.
            agent.per_sample_gradients(*random_inputs(WIDE, 4), "analytic")
            assert not [w for w in caught if w.category is FreshPagesWarning]
            out = agent.per_sample_gradients(*random_inputs(WIDE, 6), "analytic")
            agent.per_sample_gradients(*random_inputs(WIDE, 8), "analytic")
    finally:
        agent.close()
    found = [str(w.message) for w in caught if w.category is FreshPagesWarning]
    kernel = [name for name, shape in WIDE.weight_shapes().items() if shape == (1024, 1024)]
    assert len(found) == 1, found
    assert f"{kernel[0]!r} is 32.0 MiB ([8, 1024, 1024] float32" in found[0]
    assert out[kernel[0]].shape == (6, 1024, 1024)  # the padding is not returned


def test_no_warning_where_the_pages_are_reused(monkeypatch):
    monkeypatch.setattr(cpu_allocator, "_warned", False)
    monkeypatch.setattr(cpu_allocator, "remaps_large_buffers", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FreshPagesWarning)
        cpu_allocator.warn_on_fresh_pages({"w": np.zeros(FRESH_PAGES_BYTES // 4, np.float32)})


@pytest.mark.parametrize("preset,expected", [(None, "true"), ("false", "false")])
def test_the_command_line_reuses_memory_unless_told_not_to(preset, expected, monkeypatch,
                                                           capsys):
    if preset is None:
        monkeypatch.delenv(ALLOCATOR_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(ALLOCATOR_VARIABLE, preset)
    assert main([]) == 0  # no command: prints the help
    assert os.environ[ALLOCATOR_VARIABLE] == expected
    assert "usage: pgtwin" in capsys.readouterr().out
