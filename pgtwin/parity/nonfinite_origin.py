"""Where a loss that is NaN or inf on one side only makes its first non-finite value.

The loss row alone says ``TF1 loss 0.0959, TF2 loss nan``: the symptom. The cause is an op
upstream (a ``tf.where`` filling a mask with -inf that a later ``p * log p`` turns into NaN,
a ``log(0)``, a ``0 / 0``), and the user's line that made it is what they need:

* TF1: every float tensor the loss is computed from is fetched in one run; the origin is an
  op whose output holds NaN or inf while every float input it takes is finite (a fed
  placeholder holding NaN is its own origin), and its creation traceback names the line;
* TF2: the loss runs once more with ``tf.debugging.enable_check_numerics`` and
  ``tf.config.run_functions_eagerly(True)`` (so that a ``tf.function`` traced before is
  checked op by op too), and the first op it stops at, with the line that ran it, is named.
  Both settings are the process's, and are put back.
"""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from pgtwin_core.errors import raised_at, users_file
from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.model_state import state_kept
from pgtwin.parity.tf1_side import TF1Side
from pgtwin.parity.tf2_side import TF2Side

#: the TF op types whose Python call a user would recognise
CALLS = {"SelectV2": "tf.where", "Select": "tf.where", "Log": "tf.math.log",
         "RealDiv": "a division", "Div": "a division", "DivNoNan": "tf.math.divide_no_nan",
         "Exp": "tf.exp", "Sqrt": "tf.sqrt", "Rsqrt": "tf.math.rsqrt", "Pow": "a power",
         "Mul": "a product", "Sub": "a difference", "AddV2": "a sum", "Softmax": "a softmax",
         "LogSoftmax": "a log-softmax", "Placeholder": "a fed placeholder"}


def origin_note(legacy: TF1Side, eager: TF2Side, a: np.ndarray, b: np.ndarray) -> str:
    """The loss row's note where exactly one side's loss (``a`` TF1's, ``b`` TF2's) is not
    finite: that side's first non-finite value, its op and the line that made it, then the
    two values; '' where both or neither are finite, or no origin is found."""
    bad = [not np.all(np.isfinite(x)) for x in (a, b)]
    if bad[0] == bad[1]:
        return ""
    where = tf1_origin(legacy) if bad[0] else tf2_origin(eager)
    if not where:
        return ""
    side, other = ("TF1", "TF2") if bad[0] else ("TF2", "TF1")
    value, fine = (a, b) if bad[0] else (b, a)
    return (f"the {side} loss's first non-finite values are {where}: from there they reach "
            f"the loss ({side} loss {float(np.ravel(value)[0]):.6g}, {other} loss "
            f"{float(np.ravel(fine)[0]):.6g}). Keep them finite where they can reach the loss "
            "(a finite mask fill such as -1e9, log(x + eps), tf.math.divide_no_nan), as the "
            f"{other} code does")


def tf1_origin(legacy: TF1Side) -> str:
    """``what (op) at FILE:LINE``, for the first op of TF1's loss that makes a NaN or inf
    from finite inputs; '' where none is found (the loss reads its non-finite value from a
    loop, which cannot be fetched)."""
    ops = [op for op in upstream_ops(legacy.loss, control=False)
           if op._control_flow_context is None]  # noqa: SLF001 (a loop's tensors can't run)
    tensors = list({t.name: t for op in ops for t in [*op.inputs, *op.outputs]
                    if t.dtype.is_floating}.values())
    try:
        values = dict(zip((t.name for t in tensors), legacy.fetch(tensors)))
    except (tf.errors.OpError, ValueError, TypeError):
        return ""
    finite = {n: bool(np.all(np.isfinite(v))) for n, v in values.items()}
    for op in reversed(ops):  # breadth first from the loss, so the earliest ops come last
        made = [t for t in op.outputs if not finite.get(t.name, True)]
        if made and all(finite.get(t.name, True) for t in op.inputs):
            return _described(op.type, _counts(values[made[0].name]), _tf1_line(op),
                              _feed_key(legacy, op))
    return ""


def tf2_origin(eager: TF2Side) -> str:
    """``what (op) at FILE:LINE`` for the first op of the TF2 loss that makes a NaN or inf,
    found by ``tf.debugging.enable_check_numerics``; '' where it stops at none."""
    was_eager = tf.config.functions_run_eagerly()
    tf.debugging.enable_check_numerics()
    tf.config.run_functions_eagerly(True)
    try:
        with state_kept(eager):
            eager.program.loss(eager.obj, dict(eager.inputs))
    except tf.errors.InvalidArgumentError as err:
        return _from_check(err)
    except Exception:  # noqa: BLE001 (the user's code raised only when run eagerly: no origin)
        return ""
    finally:
        tf.config.run_functions_eagerly(was_eager)
        tf.debugging.disable_check_numerics()
    return ""


def _from_check(err: tf.errors.InvalidArgumentError) -> str:
    """The origin out of a check-numerics error: the op type, the counts and the user's
    line that ran the op."""
    text = str(err)
    op = re.search(r'Infinity or NaN in output \d+ of [\w-]+ op "([^"]+)"', text)
    if op is None:
        return ""
    counts = ", ".join(f"{n} {k.lstrip('+')}" for k, n in
                       re.findall(r"# of ([+-]?\w+) elements: (\d+)", text))
    shape = re.search(r"shape: \(([\d, ]*)\)", text)
    size = int(np.prod([int(d) for d in shape.group(1).replace(" ", "").split(",") if d])) \
        if shape else 0
    return _described(op.group(1), f"{counts} of {size} values" if counts else "",
                      raised_at(err).split(" (inside")[0], "")


def _counts(x: np.ndarray) -> str:
    """``'119 -Inf of 384 values'``: how many of ``x`` are each non-finite kind."""
    x = np.asarray(x)
    parts = [f"{n} {kind}" for kind, n in (("NaN", np.isnan(x).sum()),
                                             ("Inf", np.isposinf(x).sum()),
                                             ("-Inf", np.isneginf(x).sum())) if n]
    return f"{', '.join(parts)} of {x.size} values"


def _tf1_line(op: tf.Operation) -> str:
    """``FILE:LINE in FUNCTION`` of the user's code that made ``op``: the innermost frame of
    its creation traceback outside TensorFlow, pgtwin and installed packages."""
    frames = [f for f in op.traceback if users_file(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


def _feed_key(legacy: TF1Side, op: tf.Operation) -> str:
    """The batch key fed to ``op`` where it is a fed placeholder, else ''."""
    return next((k for k, t in legacy.placeholders.items() if t.op is op), "")


def _described(op_type: str, counts: str, line: str, fed: str) -> str:
    """``'made by SelectV2 (tf.where) at FILE:LINE in f (119 -Inf of 384 values)'``, or
    ``"in the batch: inputs['obs'] (3 NaN of 40 values)"`` for a fed placeholder."""
    shown = f" ({counts})" if counts else ""
    if fed:
        return f"in the batch: inputs[{fed!r}]{shown}"
    call = CALLS.get(op_type)
    return (f"made by {op_type}{f' ({call})' if call else ''}"
            + (f" at {line}" if line else "") + shown)
