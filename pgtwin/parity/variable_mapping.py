"""Which TF2 variable holds which TF1 variable: inferred, printed as a table, overridable.

A migration renames every variable (``actor/fc1/W`` -> ``sequential/dense/kernel``), so the
pairing is inferred, in this order:

1. ``name_map`` (``{tf1 name: tf2 name}``), the user's word, applied first;
2. creation order and shape: both lists in order (TF1: creation order; TF2: the order the
   loss first reads them, which is the layers' order), each variable a token
   ``(shape, kind)``, aligned like a diff (:class:`difflib.SequenceMatcher`), so a variable
   one side has and the other lacks (a bias a Keras ``Dense`` gained) leaves the rest
   paired; trusted when it pairs at least 3/4 of the longer list;
3. for what is left: the only variable of the same shape and kind, else the one whose name
   says the same (``fc1/weights`` ~ ``fc1/kernel``, ``b`` ~ ``bias``).

*Kind* is read from the last name component: ``W, w, weights, weight, kernel, matrix`` are
kernels, ``b, bias, biases`` biases (also as a prefix or suffix: ``W1``, ``fc_w``,
``bias_out``); a name that says neither is a kernel with two or more dimensions and a bias
with one. A kernel is never paired with a bias. Whatever stays unpaired, or could be paired more than one way, is a
:class:`MappingProblem` that lists the candidates with their shapes.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_KERNEL = {"w", "weights", "weight", "kernel", "matrix"}
_BIAS = {"b", "bias", "biases"}


@dataclass(frozen=True)
class VariableInfo:
    """A variable as one side names it (no ``:0``), with its static shape and dtype name."""

    name: str
    shape: tuple[int, ...]
    dtype: str = ""


@dataclass(frozen=True)
class Pair:
    """One TF1 variable and the TF2 variable that holds it, and the rule that paired them."""

    tf1: VariableInfo
    tf2: VariableInfo
    how: str


@dataclass(frozen=True)
class MappingProblem:
    """A variable that could not be paired (``side`` is ``"TF1"`` or ``"TF2"``)."""

    side: str
    variable: VariableInfo
    message: str


@dataclass
class VariableMapping:
    """The inferred pairs, in TF1 order, and what could not be paired."""

    pairs: list[Pair] = field(default_factory=list)
    problems: list[MappingProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every variable on both sides is paired."""
        return not self.problems

    def tf2_name(self) -> dict[str, str]:
        """``{tf1 name: tf2 name}`` of the pairs."""
        return {p.tf1.name: p.tf2.name for p in self.pairs}

    def to_table(self) -> str:
        """Fixed-width text: one line per pair, then one per problem."""
        rows = [(p.tf1.name, str(p.tf1.shape), p.tf2.name, str(p.tf2.shape), p.how)
                for p in self.pairs]
        header = ("TF1 variable", "shape", "TF2 variable", "shape", "paired by")
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
                  for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*r) for r in rows]
        lines += [f"UNPAIRED {p.side} {p.variable.name} {p.variable.shape}: {p.message}"
                  for p in self.problems]
        return "\n".join(lines)


class MappingError(ValueError):
    """The variables could not be paired; the message lists every problem with candidates."""

    def __init__(self, mapping: VariableMapping):
        self.mapping = mapping
        super().__init__("the TF1 and TF2 variables could not be paired:\n"
                         + "\n".join(f"- {p.side} {p.variable.name} {p.variable.shape}: "
                                     f"{p.message}" for p in mapping.problems)
                         + "\nPair them with name_map={tf1 name: tf2 name} "
                         "(pgtwin compare --map OLD=NEW).")


def name_kind(name: str) -> str:
    """``"kernel"``, ``"bias"`` or ``"other"``, from the last component of ``name``.

    Besides the exact words, the short names hand-written code uses count: ``W1``,
    ``w_pi``, ``fc_w``, ``b2``, ``bias_out``, ``value_b``.
    """
    leaf = name.rsplit("/", 1)[-1].split(":")[0].lower()
    parts = [p for p in re.split(r"[_\-.]", re.sub(r"\d+$", "", leaf)) if p] or [leaf]
    if leaf in _KERNEL or parts[0] in _KERNEL or parts[-1] in _KERNEL:
        return "kernel"
    if leaf in _BIAS or parts[0] in _BIAS or parts[-1] in _BIAS:
        return "bias"
    return "other"


def kind(name: str, shape: tuple[int, ...] | None = None) -> str:
    """The kind used for pairing: :func:`name_kind`, else guessed from the rank.

    A variable whose name says nothing (``log_std``, ``theta``) is a kernel when it has
    two or more dimensions and a bias when it has one, so it can still pair by shape.
    """
    k = name_kind(name)
    if k != "other" or shape is None:
        return k
    return "kernel" if len(shape) >= 2 else "bias" if len(shape) == 1 else "other"


def _normalised(name: str) -> str:
    """``name`` with its last component replaced by its kind (``fc1/W`` -> ``fc1/kernel``)."""
    head, _, leaf = name.rpartition("/")
    k = kind(leaf)
    leaf = leaf.lower() if k == "other" else k
    return f"{head}/{leaf}" if head else leaf


def _same_name(a: str, b: str) -> bool:
    """True when the two names say the same after normalising, compared from the end.

    ``actor/fc1/W`` ~ ``fc1/kernel`` (the shorter one is a suffix of the longer one).
    """
    pa, pb = _normalised(a).split("/"), _normalised(b).split("/")
    n = min(len(pa), len(pb))
    return pa[-n:] == pb[-n:]


def _describe(candidates: Sequence[VariableInfo]) -> str:
    return ", ".join(f"{c.name} {c.shape}" for c in candidates) or "none"


def infer_mapping(tf1: Sequence[VariableInfo], tf2: Sequence[VariableInfo],
                  name_map: Mapping[str, str] | None = None,
                  ordered: bool = True) -> VariableMapping:
    """Pair every TF1 variable with a TF2 variable (see the module docstring for the rules).

    Args:
      tf1: the TF1 variables in creation order.
      tf2: the TF2 variables in the order the TF2 loss first reads them.
      name_map: ``{tf1 name: tf2 name}`` pairs that override the inference.
      ordered: False when the TF1 order is unknown (a checkpoint's names, sorted): rule 2
        is skipped, so only shape and name pair them.

    Returns:
      A :class:`VariableMapping` whose pairs are in TF1 order; ``problems`` lists each
      variable left unpaired, with its candidates.
    """
    mapping = VariableMapping()
    by1 = {v.name: v for v in tf1}
    by2 = {v.name: v for v in tf2}
    paired: dict[str, Pair] = {}
    used2: set[str] = set()
    for old, new in (name_map or {}).items():
        if old not in by1:
            close = difflib.get_close_matches(old, list(by1), n=3)
            mapping.problems.append(MappingProblem(
                "TF1", VariableInfo(old, ()), f"name_map names a TF1 variable that is not "
                f"compared (close: {close or list(by1)})"))
        elif new not in by2:
            close = difflib.get_close_matches(new, list(by2), n=3)
            mapping.problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new!r}, which the TF2 loss does not "
                f"read (TF2 variables: {_describe(tf2)}; close: {close})"))
        elif by1[old].shape != by2[new].shape:
            mapping.problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new} {by2[new].shape}: the shapes "
                "differ"))
        elif new in used2:
            mapping.problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new}, which another TF1 variable "
                "is sent to already"))
        else:
            paired[old] = Pair(by1[old], by2[new], "name_map")
            used2.add(new)

    rest1 = [v for v in tf1 if v.name not in paired and v.name not in (name_map or {})]
    rest2 = [v for v in tf2 if v.name not in used2]
    token = lambda v: (v.shape, kind(v.name, v.shape))  # noqa: E731
    matcher = difflib.SequenceMatcher(None, [token(v) for v in rest1],
                                      [token(v) for v in rest2], autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    # The order is trusted when it pairs at least 3/4 of the longer side (a few variables
    # one side lacks); a shuffled order whose equal shapes happen to line up in places
    # (a reversed network's middle layers) would pair the wrong ones.
    if ordered and sum(b.size for b in blocks) * 4 >= 3 * max(len(rest1), len(rest2), 1):
        for b in blocks:
            for k in range(b.size):
                a, c = rest1[b.a + k], rest2[b.b + k]
                paired[a.name] = Pair(a, c, "creation order and shape")
                used2.add(c.name)
    rest1 = [v for v in rest1 if v.name not in paired]
    rest2 = [v for v in rest2 if v.name not in used2]

    for a in rest1:
        candidates = [c for c in rest2 if c.name not in used2 and token(c) == token(a)]
        named = [c for c in candidates if _same_name(a.name, c.name)]
        rivals = [x for x in rest1 if x.name not in paired and token(x) == token(a)]
        if len(named) == 1:
            paired[a.name] = Pair(a, named[0], "name")
            used2.add(named[0].name)
        elif len(candidates) == 1 and len(rivals) == 1:
            paired[a.name] = Pair(a, candidates[0], "shape")
            used2.add(candidates[0].name)
    rest2 = [v for v in rest2 if v.name not in used2]
    for a in tf1:
        if a.name in paired or a.name in (name_map or {}):
            continue
        same = [c for c in rest2 if c.shape == a.shape]
        fitting = [c for c in same if kind(c.name, c.shape) == kind(a.name, a.shape)]
        rivals = [x for x in tf1 if x.name not in paired and x.name != a.name
                  and token(x) == token(a)]
        if len(fitting) > 1:
            msg = f"ambiguous: it could be any of {_describe(fitting)}"
        elif fitting:
            msg = (f"ambiguous: {_describe(fitting)} is the only TF2 {kind(a.name, a.shape)} of this "
                   f"shape left, and {_describe(rivals)} fit it too")
        elif same:
            msg = (f"no TF2 {kind(a.name, a.shape)} of shape {a.shape} is left; only "
                   f"{_describe(same)} (a {kind(a.name, a.shape)} is not paired with a "
                   f"{kind(same[0].name, same[0].shape)})")
        else:
            msg = (f"no TF2 variable of shape {a.shape} is left (unpaired TF2: "
                   f"{_describe(rest2)})")
        mapping.problems.append(MappingProblem("TF1", a, msg + _bias_hint(a, rest2)))
    unpaired1 = [a for a in tf1 if a.name not in paired]
    for c in rest2:
        same = [a for a in unpaired1 if a.shape == c.shape]
        msg = (f"no TF1 variable holds it (unpaired TF1: {_describe(unpaired1)})"
               if not same else f"ambiguous or of another kind: TF1 {_describe(same)}")
        mapping.problems.append(MappingProblem("TF2", c, msg + _bias_hint(c, unpaired1)))
    mapping.pairs = [paired[v.name] for v in tf1 if v.name in paired]
    return mapping


def _bias_hint(v: VariableInfo, other_side_left: Sequence[VariableInfo]) -> str:
    """The fix for a bias that only one side has (``use_bias``), else ''."""
    if name_kind(v.name) != "bias" or any(kind(o.name, o.shape) == "bias" and o.shape == v.shape
                                          for o in other_side_left):
        return ""
    return (f". The other side has no bias of shape {v.shape}: if that layer has none, "
            "build the Keras layer with use_bias=False (or give the TF1 layer a bias); "
            "nothing is invented for a variable that does not exist")
