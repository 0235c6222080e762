"""XLA's vector width for the command line's process (``pgtwin/mode_agnostic/process_tuning.py``).

The choice (CPUs read from ``/proc/cpuinfo``-shaped files written here, the user's flags
kept), the command line making it, and that this XLA honours the flag at all: with it, the
optimised LLVM IR of an elementwise fusion holds 16-wide float vectors (512 bits) and none
8 wide; without it, the reverse (XLA's default of 256 bits). That last check needs a CPU
with AVX-512: elsewhere XLA cannot emit 512-bit vectors whatever the flag says.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from pgtwin.cli import main
from pgtwin.mode_agnostic import process_tuning
from pgtwin.mode_agnostic.process_tuning import (WIDE, XLA_FLAGS_VARIABLE, cpu_info,
                                                 use_wide_vectors)

AMD_512 = ("AuthenticAMD", frozenset({"fpu", "avx2", "avx512f", "avx512bw"}))
INTEL_512 = ("GenuineIntel", frozenset({"fpu", "avx2", "avx512f"}))
AMD_256 = ("AuthenticAMD", frozenset({"fpu", "avx2"}))


def _cpuinfo(tmp_path, vendor: str, flags: str) -> str:
    """Two processors, as Linux lists them; only the first is read."""
    text = "".join(f"processor\t: {i}\nvendor_id\t: {vendor}\nmodel name\t: X\n"
                   f"flags\t\t: {flags}\n\n" for i in range(2))
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return str(path)


def test_cpu_info_reads_the_vendor_and_flags(tmp_path):
    path = _cpuinfo(tmp_path, "AuthenticAMD", "fpu avx2 avx512f")
    assert cpu_info(path) == ("AuthenticAMD", frozenset({"fpu", "avx2", "avx512f"}))


def test_cpu_info_without_the_file_is_empty(tmp_path):
    assert cpu_info(str(tmp_path / "missing")) == ("", frozenset())


@pytest.mark.parametrize("cpu,added", [(AMD_512, True), (INTEL_512, False), (AMD_256, False),
                                       (("", frozenset()), False)])
def test_wide_vectors_only_where_measured_faster(cpu, added):
    env = {XLA_FLAGS_VARIABLE: "--xla_dump_to=/tmp/d"}
    assert use_wide_vectors(env, cpu) is added
    expected = f"--xla_dump_to=/tmp/d {WIDE}" if added else "--xla_dump_to=/tmp/d"
    assert env[XLA_FLAGS_VARIABLE] == expected


def test_wide_vectors_with_no_flags_set():
    env: dict[str, str] = {}
    assert use_wide_vectors(env, AMD_512)
    assert env == {XLA_FLAGS_VARIABLE: WIDE}


@pytest.mark.parametrize("users", ["--xla_cpu_prefer_vector_width=256",
                                   "--xla_backend_optimization_level=0 "
                                   "--xla_cpu_prefer_vector_width=128"])
def test_a_width_the_user_chose_is_kept(users):
    env = {XLA_FLAGS_VARIABLE: users}
    assert not use_wide_vectors(env, AMD_512)
    assert env[XLA_FLAGS_VARIABLE] == users


def test_adding_twice_adds_once():
    env: dict[str, str] = {}
    use_wide_vectors(env, AMD_512)
    assert not use_wide_vectors(env, AMD_512)
    assert env[XLA_FLAGS_VARIABLE].split().count(WIDE) == 1


def test_the_command_line_tunes_its_process(monkeypatch, capsys):
    monkeypatch.setattr(process_tuning, "cpu_info", lambda path=None: AMD_512)
    monkeypatch.setenv(XLA_FLAGS_VARIABLE, "--xla_backend_optimization_level=0")
    assert main([]) == 0  # no command: prints the help
    assert os.environ[XLA_FLAGS_VARIABLE] == f"--xla_backend_optimization_level=0 {WIDE}"
    assert "usage: pgtwin" in capsys.readouterr().out


COMPILE_SCRIPT = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
f = tf.function(lambda x: x * x + 1.0, jit_compile=True)
f(tf.zeros([4096], tf.float32))
"""


def _vector_counts(tmp_path, width_flag: str) -> tuple[int, int]:
    """``(16-wide, 8-wide)`` float vector types in the optimised IR of one elementwise
    fusion, compiled in a fresh process with ``width_flag`` added to XLA_FLAGS."""
    dump = tmp_path / f"dump{len(width_flag)}"
    flags = f"{os.environ.get(XLA_FLAGS_VARIABLE, '')} --xla_dump_to={dump} {width_flag}"
    env = {**os.environ, XLA_FLAGS_VARIABLE: flags.strip()}
    subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], env=env, check=True,
                   capture_output=True, timeout=300)
    text = "".join(open(f).read() for f in glob.glob(str(dump / "*ir-with-opt.ll")))
    assert text, "XLA wrote no optimised IR: the dump flags changed"
    return text.count("<16 x float>"), text.count("<8 x float>")


@pytest.mark.skipif("avx512f" not in cpu_info()[1],
                    reason="512-bit vectors need a CPU with AVX-512")
def test_this_xla_honours_the_vector_width(tmp_path):
    # The test run's level 0 (conftest.py) would leave the loop unvectorised: level 3 here.
    level = "--xla_backend_optimization_level=3"
    wide16, wide8 = _vector_counts(tmp_path, f"{level} {WIDE}")
    default16, default8 = _vector_counts(tmp_path, level)
    assert wide16 > 0 and wide8 == 0, (wide16, wide8)
    assert default16 == 0 and default8 > 0, (default16, default8)
