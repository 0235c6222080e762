"""The parity ladder's report: per rung and variable, how far two implementations part.

The rungs follow TensorFlow's migration guide: same variables -> same outputs on fixed
weights -> same loss -> same gradients -> same weights after optimizer steps (-> same
training run), with a rung before them for user code: the same initial-value
distributions (a row there may be a warning: ok, with a note starting ``WARNING``). A :class:`ParityReport` holds one :class:`Row` per (rung, item) compared and
names the first rung, and item, where the two part.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

RUNGS = ("initialisation", "variables", "outputs", "loss", "gradients", "weights", "training")
#: The twins' ladder: both are built from one spec and one set of numpy weights, so their
#: initial values are equal by construction and there is no initialisation rung.
TWIN_RUNGS = RUNGS[1:]


@dataclass(frozen=True)
class Row:
    """One comparison: an item (variable, output, ...) at one rung."""

    rung: str
    item: str
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""
    context: str = ""
    """What else identifies the row (policy kind, dtype, optimizer ...)."""


FOLLOWS_PREFIX = "follows from"
"""How a row's note starts where it parts as a consequence of an earlier rung's parting
(``weights_rung.FOLLOWS_EARLIER``): no cause for the summary to borrow."""

NON_FINITE_PREFIX = "non-finite values: "
"""How a row's note starts where one side holds NaN or inf: a count, not a cause."""

BORROWED_RUNGS = ("outputs", "loss", "gradients")
"""The rungs whose notes the summary may borrow for a first failure without one."""

LOSS_VALUES_PREFIX = "TF1 loss "
"""The start of a loss row's note that gives the two values and no cause: the summary does
not borrow it for a failing row without a note of its own."""


@dataclass
class ParityReport:
    """Rows in ladder order, with the verdict."""

    rows: list[Row] = field(default_factory=list)
    mapping_table: str = ""
    """How the TF1 variables were paired with the TF2 ones (user code), printed first."""
    pairs: list[dict] = field(default_factory=list)
    """The same pairing as records (``VariableMapping.to_records``), for ``to_dict``."""

    @property
    def ok(self) -> bool:
        """True when every row passed."""
        return all(r.ok for r in self.rows)

    @property
    def first_failure(self) -> Row | None:
        """The first failing row in ladder order (rung order, then insertion order)."""
        failing = [r for r in self.rows if not r.ok]
        if not failing:
            return None
        order = {name: i for i, name in enumerate(RUNGS)}
        return min(failing, key=lambda r: (order.get(r.rung, len(RUNGS)), self.rows.index(r)))

    def add(self, row: Row) -> Row:
        """Append ``row`` and return it."""
        self.rows.append(row)
        return row

    def extend(self, other: "ParityReport") -> None:
        """Append all rows of ``other``."""
        self.rows.extend(other.rows)

    @property
    def warnings(self) -> list[Row]:
        """Rows that passed with a warning (initial values that look different)."""
        return [r for r in self.rows if r.ok and r.note.startswith("WARNING")]

    def summary(self) -> str:
        """One line: all passed, or where the two implementations first part."""
        bad = self.first_failure
        if bad is None:
            warned = self.warnings
            return (f"parity OK: {len(self.rows)} comparisons passed"
                    + (f", {len(warned)} with a warning (first: {warned[0].item}: "
                       f"{warned[0].note})" if warned else ""))
        where = f" [{bad.context}]" if bad.context else ""
        # a first failure that says nothing: the first later failing row that names a cause
        # (a double softmax parts at the outputs, and the loss rung names it), not one that
        # says it follows from an earlier rung
        # (only from the forward rungs: a weights row's note tells how far the steps part,
        # not why an output parted)
        told = bad.note or next((f"{r.rung} '{r.item}' says: {r.note}" for r in self.rows
                                 if not r.ok and r.note and r.rung in BORROWED_RUNGS
                                 and not r.note.startswith((FOLLOWS_PREFIX,
                                                            LOSS_VALUES_PREFIX))), "")
        return (f"parity FAILED at rung '{bad.rung}', item '{bad.item}'{where}: "
                f"max abs {bad.max_abs:.3g}, max rel {bad.max_rel:.3g}"
                + (f" ({told})" if told else ""))

    def to_table(self) -> str:
        """A fixed-width text table of every row, then the summary line."""
        header = ("context", "rung", "item", "max_abs", "max_rel", "ok")
        lines = [(r.context, r.rung, r.item, f"{r.max_abs:.3e}", f"{r.max_rel:.3e}",
                  _verdict(r))
                 for r in self.rows]
        widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
                  for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [self.mapping_table, ""] if self.mapping_table else []
        out += [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*line) for line in lines]
        out.append(self.summary())
        return "\n".join(out)

    def to_dict(self) -> dict:
        """JSON-ready ``{"ok": bool, "summary": str, "mapping": str, "pairs": [...],
        "rows": [...]}``: ``mapping`` is the pairing as the table prints it, ``pairs`` the
        same as one record per pair or unpaired variable."""
        return {"ok": self.ok, "summary": self.summary(), "mapping": self.mapping_table,
                "pairs": self.pairs, "rows": [asdict(r) for r in self.rows]}

    def to_json(self) -> str:
        """:meth:`to_dict` as standard JSON: a row's ``max_abs`` or ``max_rel`` that is not
        finite (a row that could not be compared: a raising step, dtypes that differ) is
        ``null``, as JSON has no Infinity or NaN for strict parsers (JavaScript's, jq's
        strict mode) to read."""
        data = self.to_dict()
        for row in data["rows"]:
            for key in ("max_abs", "max_rel"):
                if not np.isfinite(row[key]):
                    row[key] = None
        return json.dumps(data, allow_nan=False)


def _verdict(row: Row) -> str:
    """``pass``, ``warn (...)``, ``pass (note)`` or ``FAIL (note)`` for the table."""
    if not row.ok:
        return "FAIL" + (f" ({row.note})" if row.note else "")
    if row.note.startswith("WARNING"):
        return f"warn ({row.note[len('WARNING '):]})"
    return "pass" + (f" ({row.note})" if row.note else "")


def common_factor(a: np.ndarray, b: np.ndarray, rtol: float, slack: float = 0.0
                  ) -> float | None:
    """c where ``b`` is ``c a``, all of it: what is left, ``|b - c a|``, is within ``rtol``
    of ``|b|`` plus ``slack`` (the arrays' own rounding), c the least-squares factor
    ``a.b / a.a``; None where it is not, where ``a`` or ``b`` is all zero, or either is not
    finite. Whether c is 1 is the caller's to judge."""
    x, y = (np.ravel(np.asarray(v, np.float64)) for v in (a, b))
    norm = float(x @ x)
    if x.shape != y.shape or norm == 0.0 or not np.any(y) \
            or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    c = float(x @ y) / norm
    if not np.isfinite(c) or np.linalg.norm(y - c * x) > rtol * np.linalg.norm(y) + slack:
        return None
    # element by element too: a few huge entries (a mask's fill, 3.4e38 against 1e9) can
    # carry the norms while every other element parts
    residual = np.maximum(np.abs(y - c * x) - slack, 0.0) / (
        np.abs(y) + np.abs(c * x) + np.finfo(np.float64).tiny)
    return c if float(np.median(residual)) <= max(rtol, 1e-6) else None


def errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``(max abs error, max relative error)`` between two arrays of the same shape.

    The relative error divides by ``max(|a|, |b|)`` elementwise, with exact zeros in both
    counting as zero error (so a gradient that is 0 in both is not an infinite error).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), float("inf")
    if a.size == 0:
        return 0.0, 0.0
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, NaN: judged below
        diff = np.abs(a - b)
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if bad.any():
        same = np.isnan(a) & np.isnan(b) | (a == b)
        if not same[bad].all():
            return float("inf"), float("inf")
    return float(np.nanmax(diff)), float(np.nanmax(rel))


TWIN_SIDES = ("the graph twin", "the eager twin")
"""What :func:`compare_arrays` calls its two arrays in the twins' ladder."""


def compare_arrays(rung: str, item: str, a: np.ndarray, b: np.ndarray, rtol: float,
                   atol: float = 0.0, context: str = "",
                   sides: tuple[str, str] = ("TF1", "TF2")) -> Row:
    """A row for ``a`` vs ``b``: ok when every element has ``|a - b| <= atol + rtol * scale``.

    A row with non-finite values fails with a note naming the side (``sides``: what ``a``
    and ``b`` are) that holds them, where: its max_abs alone (NaN where both are NaN)
    would not say."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if a64.shape != b64.shape:
        return Row(rung, item, float("inf"), float("inf"), False,
                   f"shapes differ: {a64.shape} vs {b64.shape}", context)
    max_abs, max_rel = errors(a64, b64)
    scale = np.maximum(np.abs(a64), np.abs(b64))
    ok = bool(np.all(np.abs(a64 - b64) <= atol + rtol * scale) and np.isfinite(max_abs))
    return Row(rung, item, max_abs, max_rel, ok, "" if ok else nonfinite_note(a64, b64, sides),
               context)


def nonfinite_note(a: np.ndarray, b: np.ndarray, sides: tuple[str, str]) -> str:
    """Which of two arrays hold non-finite values, how many and the first ('' if none)."""
    parts = []
    for side, x in zip(sides, (a, b)):
        bad = ~np.isfinite(x)
        if bad.any():
            index = np.unravel_index(int(np.argmax(bad)), x.shape) if x.ndim else ()
            where = f"[{', '.join(str(int(i)) for i in index)}] " if index else ""
            parts.append(f"{side} holds {int(bad.sum())} non-finite of {x.size} (first "
                         f"{where}= {x[index] if index else x})")
    if not parts:
        return ""
    return NON_FINITE_PREFIX + "; ".join(parts) + (
        "" if len(parts) == 2 else f"; {sides[1] if parts[0].startswith(sides[0]) else sides[0]}"
        " none")
