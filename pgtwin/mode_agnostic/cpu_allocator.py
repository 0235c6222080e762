"""TensorFlow's CPU allocator and large arrays: whether each call gets fresh pages, the
command line's choice of allocator, and the one-time warning of the per-sample methods.

glibc's malloc serves a request of 32 MiB or more (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit,
the most its dynamic mmap threshold ever rises to) with its own ``mmap`` and gives it back
with ``munmap`` when it is freed. TensorFlow's default CPU allocator passes each tensor to
malloc, so a per-sample gradient that large is mapped again on every call, and the kernel
faults in and zeroes it one 4 KiB page at a time, which takes longer than computing it
(docs/benchmarks.md, section 3). TensorFlow's BFC allocator (``TF_CPU_ALLOCATOR_USE_BFC=true``,
read when the process creates its CPU device, i.e. before its first op) keeps freed regions
and reuses them. So does the allocator TensorFlow uses instead of malloc where oneDNN is on
(``TF_ENABLE_ONEDNN_OPTS``; TensorFlow's default on x86 CPUs with AVX-512 VNNI or AMX, such
as recent Xeons): it is built on BFC, and such a process never paid the cost. The ``pgtwin``
command line turns BFC on; a library user's process is theirs to configure, so the
per-sample methods only say so, once.

TensorFlow is imported only where it is used, so the command line can set the variable before
anything imports it.
"""
from __future__ import annotations

import functools
import os
import platform
import warnings

import numpy as np

ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"

FRESH_PAGES_BYTES = 32 * 2**20
"""glibc's largest mmap threshold on 64-bit: a buffer this large is mapped on every call."""


class FreshPagesWarning(UserWarning):
    """A per-sample array large enough that each call maps and zeroes its pages again."""


_warned = False


def use_reusing_allocator() -> None:
    """Has TensorFlow's CPU tensors come from its BFC allocator, which reuses freed memory,
    unless the environment already chose (``TF_CPU_ALLOCATOR_USE_BFC=false`` keeps malloc).
    Only a process that has not yet run a TensorFlow op is affected: the ``pgtwin`` command
    line calls it first thing, and ``pgtwin bench``'s pytest child inherits the variable, so
    its figures are what a ``pgtwin train`` process pays."""
    os.environ.setdefault(ALLOCATOR_VARIABLE, "true")


@functools.cache
def remaps_large_buffers() -> bool:
    """Whether this process's CPU tensors come from glibc's malloc without TensorFlow's BFC
    allocator. BFC is the one CPU allocator that keeps statistics (oneDNN's, which TensorFlow
    uses where oneDNN is on, is built on it), so ``get_memory_info('CPU:0')`` answers only
    under it (``ValueError`` otherwise). Other C libraries are not judged: False."""
    if platform.libc_ver()[0] != "glibc":
        return False
    import tensorflow as tf

    try:
        tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:
        return True
    return False


def fresh_pages_message(name: str, array: np.ndarray) -> str:
    """What :class:`FreshPagesWarning` says: the array, the cause, what it costs and the fix."""
    mib = array.nbytes / 2**20
    return (f"TensorFlow's buffer for the per-sample gradient {name!r} is {mib:.1f} MiB "
            f"({list(array.shape)} {array.dtype}, rows padded to the call's bucket): glibc's malloc gives every buffer of {FRESH_PAGES_BYTES // 2**20} "
            "MiB or more its own pages and returns them to the system when it is freed, so "
            "each call has the kernel map and zero them again (measured 4-5x slower per "
            "sample at B = 2048 than with the pages reused, docs/benchmarks.md section 3). "
            f"Set {ALLOCATOR_VARIABLE}=true in the environment before TensorFlow runs its first "
            "op (the pgtwin command line does), or ask for fewer rows per call")


def warn_on_fresh_pages(arrays: dict[str, np.ndarray], stacklevel: int = 3) -> None:
    """Warns once per process when the largest of ``arrays`` (name -> TensorFlow's whole
    buffer, bucket padding included) is at least :data:`FRESH_PAGES_BYTES` and
    :func:`remaps_large_buffers`."""
    global _warned
    if _warned or not arrays:
        return
    name, largest = max(arrays.items(), key=lambda item: item[1].nbytes)
    if largest.nbytes < FRESH_PAGES_BYTES or not remaps_large_buffers():
        return
    _warned = True
    warnings.warn(fresh_pages_message(name, largest), FreshPagesWarning, stacklevel=stacklevel)
