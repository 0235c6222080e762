"""What the ``pgtwin`` command line sets for its own process before TensorFlow runs: the CPU
allocator (``cpu_allocator``) and the width of XLA's vectors on the CPU.

XLA's CPU backend emits its elementwise loops for 256-bit vectors unless
``--xla_cpu_prefer_vector_width`` says otherwise, AVX-512 or not: on many Intel cores
512-bit instructions lower the clock of the whole core, and that default avoids it. The
episodic ``optimal_time`` update is such loops (``episodic_baselines._time``: psi's update,
its square and the ascent's terms, every step, over ``[E, *shape]``), and on the AMD EPYC
with AVX-512 this project is measured on, 512-bit vectors made that update faster; the other
XLA-compiled paths (the rollout's policy, the per-sample gradients) did not move
(docs/benchmarks.md section 6). On the one Intel CPU with AVX-512 measured (a Xeon with
AMX) it made no difference, so the command line adds it on AMD CPUs with AVX-512 only. A
flag the user already set in ``XLA_FLAGS`` is kept as it is
(``--xla_cpu_prefer_vector_width=256`` keeps XLA's default).

XLA reads ``XLA_FLAGS`` once, when the process compiles its first computation, so this has
to run before that; in a library user's process the flags are theirs to choose.
"""
from __future__ import annotations

import os
from typing import MutableMapping

from pgtwin.mode_agnostic.cpu_allocator import use_reusing_allocator

XLA_FLAGS_VARIABLE = "XLA_FLAGS"
VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width"
WIDE = f"{VECTOR_WIDTH_FLAG}=512"
CPUINFO = "/proc/cpuinfo"


def cpu_info(path: str = CPUINFO) -> tuple[str, frozenset[str]]:
    """``(vendor_id, flags)`` of the first processor listed in ``path`` (Linux's
    ``/proc/cpuinfo``); ``("", frozenset())`` where the file cannot be read (another OS)."""
    vendor, flags = "", frozenset()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if vendor and flags:
                    break
    except OSError:
        pass
    return vendor, flags


def wide_vectors_measured_faster(vendor: str, flags: frozenset[str]) -> bool:
    """Whether 512-bit vectors are the measured choice on this CPU: AMD with AVX-512."""
    return vendor == "AuthenticAMD" and "avx512f" in flags


def use_wide_vectors(environ: MutableMapping[str, str] | None = None,
                     cpu: tuple[str, frozenset[str]] | None = None) -> bool:
    """Adds :data:`WIDE` to ``XLA_FLAGS`` in ``environ`` (``os.environ``) when the CPU
    (``cpu``, else :func:`cpu_info`) is one where it was measured faster and the flags do not
    already choose a vector width. Returns whether it added the flag."""
    environ = os.environ if environ is None else environ
    flags = environ.get(XLA_FLAGS_VARIABLE, "")
    if any(part.split("=", 1)[0] == VECTOR_WIDTH_FLAG for part in flags.split()):
        return False
    if not wide_vectors_measured_faster(*(cpu_info() if cpu is None else cpu)):
        return False
    environ[XLA_FLAGS_VARIABLE] = f"{flags} {WIDE}".strip()
    return True


def tune_process() -> None:
    """The command line's settings for its own process (``pgtwin`` runs it first thing, and
    the benchmarks do, so that they time what a ``pgtwin train`` process runs): TensorFlow's
    reusing CPU allocator and, where measured faster, XLA's 512-bit vectors. Only a process
    that has run no TensorFlow op and compiled nothing with XLA is affected."""
    use_reusing_allocator()
    use_wide_vectors()
