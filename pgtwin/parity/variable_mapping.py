"""Which TF2 variable holds which TF1 variable: inferred, printed as a table, overridable.

A migration renames every variable (``actor/fc1/W`` -> ``sequential/dense/kernel``), so the
pairing is inferred, in this order:

1. ``name_map`` (``{tf1 name: tf2 name}``), the user's word, applied first;
2. creation order and shape (where it crosses two variables whose scoped names say the same,
   ``actor_h/kernel`` ~ ``model/actor_h/kernel``, those names pair first, unless the order
   pairs every numbered layer the same count apart, ``l1`` ~ ``l0``, ``l2`` ~ ``l1``: a 1-based
   and a 0-based count): both lists in order (TF1: creation order; TF2: the order the
   loss first reads them, which is the layers' order), each variable a token
   ``(shape, kind)``, aligned like a diff (:class:`difflib.SequenceMatcher`), so a variable
   one side has and the other lacks (a bias a Keras ``Dense`` gained) leaves the rest
   paired; trusted when it pairs at least 3/4 of the longer list;
3. for what is left: the only variable of the same shape and kind, else the one whose name
   says the same (``fc1/weights`` ~ ``fc1/kernel``, ``b`` ~ ``bias``), else the one with
   the same leaf whose scope shares the most words, when each is the other's best
   (``policy/fc1/bn/gamma`` ~ ``policy/fc1_bn/gamma``: "similar name").

*Kind* is read from the last name component: ``W, w, weights, weight, kernel, matrix`` are
kernels, ``b, bias, biases`` biases (also as a prefix or suffix: ``W1``, ``fc_w``,
``bias_out``); a name that says neither is a kernel with two or more dimensions and a bias
with one. A kernel is never paired with a bias. Whatever stays unpaired, or could be paired more than one way, is a
:class:`MappingProblem` that lists the candidates with their shapes.
"""
from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_KERNEL = {"w", "weights", "weight", "kernel", "matrix"}
_BIAS = {"b", "bias", "biases"}
_SCALE = {"gamma", "scale"}  # batch or layer normalisation's trained scale
_OFFSET = {"beta", "offset"}  # ... and its trained offset


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
    exists: bool = True
    """False for a name the user gave (``name_map``) that names no variable: it has no shape."""

    @property
    def shape_text(self) -> str:
        """``"(3, 4)"``, or ``"(no such variable)"``: a ``()`` would read as a scalar."""
        return str(self.variable.shape) if self.exists else "(no such variable)"

    @property
    def described(self) -> str:
        """``"TF1 name (3, 4)"``."""
        return f"{self.side} {self.variable.name} {self.shape_text}"


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

    def to_records(self, role: str) -> list[dict]:
        """JSON-ready, one dict per pair (``tf1``, ``tf1_shape``, ``tf2``, ``tf2_shape``,
        ``paired_by``, ``role``) then per problem (``unpaired``: the side, with ``message``);
        ``role`` says what the variables are (``"trained"`` or ``"state"``)."""
        out = [{"role": role, "tf1": p.tf1.name, "tf1_shape": list(p.tf1.shape),
                "tf2": p.tf2.name, "tf2_shape": list(p.tf2.shape), "paired_by": p.how}
               for p in self.pairs]
        out += [{"role": role, "unpaired": p.side, "name": p.variable.name,
                 "shape": list(p.variable.shape) if p.exists else None, "message": p.message}
                for p in self.problems]
        return out

    def to_table(self, with_problems: bool = True) -> str:
        """Fixed-width text: one line per pair, then (``with_problems``) one per problem;
        an error that lists the problems itself shows the pairs alone."""
        rows = [(p.tf1.name, str(p.tf1.shape), p.tf2.name, str(p.tf2.shape), p.how)
                for p in self.pairs]
        header = ("TF1 variable", "shape", "TF2 variable", "shape", "paired by")
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
                  for i, h in enumerate(header)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*r) for r in rows]
        lines += [f"UNPAIRED {p.described}: {p.message}"
                  for p in self.problems if with_problems]
        return "\n".join(lines)


class MappingError(ValueError):
    """The variables could not be paired; the message lists every problem with candidates."""

    def __init__(self, mapping: VariableMapping):
        self.mapping = mapping
        super().__init__("the TF1 and TF2 variables could not be paired:\n"
                         + "\n".join(f"- {p.described}: {p.message}"
                                     for p in mapping.problems)
                         + "\nPair them with name_map={tf1 name: tf2 name} "
                         "(pgtwin compare --map OLD=NEW).")


def name_kind(name: str) -> str:
    """``"kernel"``, ``"bias"``, ``"scale"``, ``"offset"`` or ``"other"``, from the last
    component of ``name``.

    Besides the exact words, the short names hand-written code uses count: ``W1``,
    ``w_pi``, ``fc_w``, ``b2``, ``bias_out``, ``value_b``. A normalisation's ``gamma`` and
    ``beta`` are kinds of their own: both are vectors of the layer's width, and a layer
    built without one (``tf_slim``'s ``batch_norm`` has ``scale=False``) must leave the
    other paired with its namesake, not with it.
    """
    leaf = name.rsplit("/", 1)[-1].split(":")[0].lower()
    parts = [p for p in re.split(r"[_\-.]", re.sub(r"\d+$", "", leaf)) if p] or [leaf]
    for kind_name, words in (("kernel", _KERNEL), ("bias", _BIAS)):
        if leaf in words or parts[0] in words or parts[-1] in words:
            return kind_name
    for kind_name, words in (("scale", _SCALE), ("offset", _OFFSET)):
        if leaf in words:
            return kind_name
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
                  ordered: bool = True,
                  tf2_orders: Sequence[Sequence[VariableInfo]] = ()) -> VariableMapping:
    """Pair every TF1 variable with a TF2 variable (see the module docstring for the rules).

    Args:
      tf1: the TF1 variables in creation order.
      tf2: the TF2 variables in the order the TF2 loss first reads them.
      name_map: ``{tf1 name: tf2 name}`` pairs that override the inference.
      ordered: False when the TF1 order is unknown (a checkpoint's names, sorted): rule 2
        is skipped, so only shape and name pair them.
      tf2_orders: other orders of the same TF2 variables (the model's creation order):
        rule 2 aligns TF1's with the one of these and ``tf2`` that pairs the most (``tf2``
        on a tie). A loss that reads the critic before the actor reads equal shapes in
        another order than TF1 made them; the model made them in TF1's.

    Returns:
      A :class:`VariableMapping` whose pairs are in TF1 order; ``problems`` lists each
      variable left unpaired, with its candidates.
    """
    name_map = dict(name_map or {})
    state = _Pairing(list(tf1), list(_best_order(tf1, [tf2, *tf2_orders]) if ordered else tf2))
    problems = _pair_by_name_map(state, name_map)
    if ordered:
        _pair_named_against_order(state, skip=set(name_map))
        _pair_by_order(state, skip=set(name_map))
    _pair_by_shape_or_name(state, skip=set(name_map))
    problems += _unpaired(state, skip=set(name_map))
    return VariableMapping(pairs=[state.paired[v.name] for v in tf1 if v.name in state.paired],
                           problems=problems)


def _best_order(tf1: Sequence[VariableInfo], orders: list[Sequence[VariableInfo]]
                ) -> Sequence[VariableInfo]:
    """The one of ``orders`` whose (shape, kind) tokens align with the most of ``tf1``'s
    (the first on a tie)."""
    def aligned(order):
        matcher = difflib.SequenceMatcher(None, [_token(v) for v in tf1],
                                          [_token(v) for v in order], autojunk=False)
        return sum(b.size for b in matcher.get_matching_blocks())
    return max(orders, key=lambda order: (aligned(order), -orders.index(order)))


@dataclass
class _Pairing:
    """The two lists and what is paired so far (by TF1 name; TF2 names used)."""

    tf1: list[VariableInfo]
    tf2: list[VariableInfo]
    paired: dict[str, Pair] = field(default_factory=dict)
    used2: set[str] = field(default_factory=set)

    def pair(self, a: VariableInfo, c: VariableInfo, how: str) -> None:
        self.paired[a.name] = Pair(a, c, how)
        self.used2.add(c.name)

    def left(self, skip: set[str] = frozenset()) -> tuple[list[VariableInfo], list[VariableInfo]]:
        """The TF1 and TF2 variables not paired yet (TF1 names in ``skip`` left out)."""
        return ([v for v in self.tf1 if v.name not in self.paired and v.name not in skip],
                [v for v in self.tf2 if v.name not in self.used2])


def _token(v: VariableInfo) -> tuple:
    return v.shape, kind(v.name, v.shape)


def _pair_by_name_map(state: _Pairing, name_map: Mapping[str, str]) -> list[MappingProblem]:
    """Rule 1: the user's pairs; each one that cannot hold is a problem."""
    by1 = {v.name: v for v in state.tf1}
    by2 = {v.name: v for v in state.tf2}
    problems = []
    for old, new in name_map.items():
        if old not in by1:
            close = difflib.get_close_matches(old, list(by1), n=3)
            problems.append(MappingProblem(
                "TF1", VariableInfo(old, ()), f"name_map names a TF1 variable that is not "
                f"compared (close: {close or list(by1)})", exists=False))
        elif new not in by2:
            close = difflib.get_close_matches(new, list(by2), n=3)
            problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new!r}, which the TF2 loss does not "
                f"read (TF2 variables: {_describe(state.tf2)}; close: {close})"))
        elif by1[old].shape != by2[new].shape:
            problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new} {by2[new].shape}: the shapes "
                "differ"))
        elif new in state.used2:
            problems.append(MappingProblem(
                "TF1", by1[old], f"name_map sends it to {new}, which another TF1 variable "
                "is sent to already"))
        else:
            state.pair(by1[old], by2[new], "name_map")
    return problems


def _pair_by_order(state: _Pairing, skip: set[str]) -> None:
    """Rule 2: both lists aligned like a diff on (shape, kind) tokens.

    The order is trusted when it pairs at least 3/4 of the longer side (a few variables
    one side lacks); a shuffled order whose equal shapes happen to line up in places (a
    reversed network's middle layers) would pair the wrong ones.
    """
    rest1, rest2 = state.left(skip)
    matcher = difflib.SequenceMatcher(None, [_token(v) for v in rest1],
                                      [_token(v) for v in rest2], autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    if sum(b.size for b in blocks) * 4 < 3 * max(len(rest1), len(rest2), 1):
        return
    for b in blocks:
        for k in range(b.size):
            state.pair(rest1[b.a + k], rest2[b.b + k], "creation order and shape")


def _pair_named_against_order(state: _Pairing, skip: set[str]) -> None:
    """Before rule 2: where the creation order would cross two variables whose scoped names
    say otherwise, the names win, and rule 2 aligns the rest.

    Equal shapes in another order are common (an actor's and a critic's hidden layers of
    one width, the TF2 loss reading the critic first): the order alone pairs them crosswise.
    A name counts here only where it says the same with its scope (``actor_h/kernel`` ~
    ``model/actor_h/kernel``, not a bare ``kernel``) and names no other variable of its
    token on either side. Only the pairs the order would cross are taken here; where the
    order agrees with the names it pairs them itself (label "creation order and shape")."""
    rest1, rest2 = state.left(skip)
    named = []
    for a in rest1:
        fits = [c for c in rest2 if _token(c) == _token(a) and _scoped_same_name(a.name, c.name)]
        back = [x for x in rest1 if fits and _token(x) == _token(a)
                and _scoped_same_name(x.name, fits[0].name)]
        if len(fits) == 1 and len(back) == 1:
            named.append((a, fits[0]))
    trial = _Pairing(list(state.tf1), list(state.tf2), dict(state.paired), set(state.used2))
    _pair_by_order(trial, skip)
    shift = _renumbered([p for n, p in trial.paired.items() if n not in state.paired])
    if shift:  # the order pairs every numbered layer the same count apart: take it
        for name, p in trial.paired.items():
            if name not in state.paired:
                state.pair(p.tf1, p.tf2, p.how + (f" (the scopes count layers {shift:+d} "
                                                  "apart)" if _layer_shifts(p) else ""))
        return
    crossed = [(a, c) for a, c in named
               if a.name not in trial.paired or trial.paired[a.name].tf2.name != c.name]
    if any(a.name in trial.paired for a, _ in crossed):
        for a, c in crossed:
            state.pair(a, c, "name (the creation order disagreed)")


def _numbers(name: str) -> dict[str, int]:
    """The scope's numbered words by stem (``pi/fc2/W`` -> ``{"fc": 2}``); a bare number
    (Keras' ``dense_3`` counts layers per process) says nothing."""
    _, words = _name_parts(name)
    return {m.group(1): int(m.group(2)) for m in
            (re.fullmatch(r"([a-z][a-z]*?)(\d+)", w) for w in words) if m}


def _layer_shifts(pair: Pair) -> list[int]:
    """TF1's number less TF2's, for each stem that numbers a layer on both sides."""
    one, two = _numbers(pair.tf1.name), _numbers(pair.tf2.name)
    return [one[stem] - two[stem] for stem in one.keys() & two.keys()]


def _renumbered(pairs: Sequence[Pair]) -> int:
    """The shift ``n`` when the pairs that number a layer on both sides all differ by the same
    ``n != 0``, at least two of them (``l1 ~ l0``, ``l2 ~ l1``: one side counts from 1, the
    other from 0); else 0. Then the names' numbers say nothing about which layer is which,
    and the creation order does."""
    shifts = [n for p in pairs for n in _layer_shifts(p)]
    return shifts[0] if len(shifts) >= 2 and len(set(shifts)) == 1 and shifts[0] else 0


def _scoped_same_name(a: str, b: str) -> bool:
    """:func:`_same_name` with at least one scope component besides the leaf."""
    return min(a.count("/"), b.count("/")) >= 1 and _same_name(a, b)


def _pair_by_shape_or_name(state: _Pairing, skip: set[str]) -> None:
    """Rule 3: the one candidate whose name says the same, else the only one of its token."""
    rest1, _ = state.left(skip)
    for a in rest1:
        _, rest2 = state.left(skip)
        candidates = [c for c in rest2 if _token(c) == _token(a)]
        named = [c for c in candidates if _same_name(a.name, c.name)]
        rivals = [x for x in state.left(skip)[0] if _token(x) == _token(a)]
        if len(named) == 1:
            state.pair(a, named[0], "name")
        elif len(candidates) == 1 and len(rivals) == 1 and not _numbered_apart(
                _name_parts(a.name)[1], _name_parts(candidates[0].name)[1]):
            state.pair(a, candidates[0], "shape")
        else:
            near = _most_alike(a, candidates)
            if near is not None and _most_alike(near, rivals) is a:
                state.pair(a, near, "similar name")


def _name_parts(name: str) -> tuple[str, set[str]]:
    """``(leaf, the scope's words)``: the leaf as :func:`_normalised` writes it, the scope
    split at ``/ _ - . :`` (``policy/fc1_bn/gamma`` -> ``("gamma", {policy, fc1, bn})``)."""
    head, _, leaf = _normalised(name).rpartition("/")
    return leaf, {w for w in re.split(r"[/_\-.:]+", head.lower()) if w}


def _most_alike(a: VariableInfo, others: Sequence[VariableInfo]) -> VariableInfo | None:
    """The one of ``others`` with ``a``'s leaf whose scope shares the most words with
    ``a``'s (``policy/fc1/bn/gamma`` ~ ``policy/fc1_bn/gamma``, not ``policy/fc2_bn/gamma``);
    None when no other has the leaf or two share as many."""
    leaf, words = _name_parts(a.name)
    scores = sorted(((len(words & w), o) for o in others
                     for l, w in [_name_parts(o.name)]
                     if l == leaf and not _numbered_apart(words, w)),
                    key=lambda x: -x[0])
    if not scores or (len(scores) > 1 and scores[0][0] == scores[1][0]):
        return None
    return scores[0][1]


def _numbered_apart(words: set[str], others: set[str]) -> bool:
    """Whether two scopes number the same thing differently (``fc3`` against ``fc0``): two
    layers, whatever else their names share (a 1-based TF1 ``q/fc3`` is not a 0-based
    Keras ``q/fc0``, though both are under ``q``)."""
    def numbered(ws):  # a word of letters and a number; a bare number (Keras' dense_3
        # counts layers per process) says nothing
        return {re.sub(r"\d+", "#", w): w for w in ws
                if re.search(r"\d", w) and re.search(r"[a-z]", w)}
    mine, theirs = numbered(words - others), numbered(others - words)
    return any(stem in theirs for stem in mine)


def _unpaired(state: _Pairing, skip: set[str]) -> list[MappingProblem]:
    """A problem for each variable left on either side, with its candidates."""
    rest1, rest2 = state.left(skip)
    convolved = any(len(v.shape) == 4 for v in state.tf1)  # a conv kernel: flattens follow
    problems = []
    for a in rest1:
        cell = _fused_cell_hint(a, rest2) + _gru_cell_hint(a, rest1, rest2, tf1_side=True)
        problems.append(MappingProblem("TF1", a, _why_unpaired(a, rest1, rest2)
                                       + (cell or _bias_hint(a, rest2, state.tf2))
                                       + _axes_hint(a, rest2, "TF2")
                                       + (_flattened_size_hint(a, rest2) if convolved else "")))
    unpaired1 = [a for a in state.tf1 if a.name not in state.paired]
    for c in rest2:
        same = [a for a in unpaired1 if a.shape == c.shape]
        msg = (f"no TF1 variable holds it (unpaired TF1: {_describe(unpaired1)})"
               if not same else f"ambiguous or of another kind: TF1 {_describe(same)}")
        cell = _gru_cell_hint(c, unpaired1, rest2, tf1_side=False)
        problems.append(MappingProblem("TF2", c, msg + (cell or _bias_hint(c, unpaired1,
                                                                           state.tf1)
                                                        or _free_variable_hint(c, state))
                                       + _axes_hint(c, unpaired1, "TF1")))
    return problems


def _free_variable_hint(kernel: VariableInfo, state: _Pairing) -> str:
    """For a TF2 kernel ``[n, k]`` left unpaired whose layer's bias ``[k]`` was paired with
    a TF1 variable that is no layer's bias (TF1's free ``log_std``): TF1 keeps a variable
    where the port computes a layer (a state-dependent log-std from a Dense head); ''
    otherwise."""
    if len(kernel.shape) != 2 or not kernel.name.endswith("kernel"):
        return ""
    bias = kernel.name[:-len("kernel")] + "bias"
    partner = next((p.tf1 for p in state.paired.values() if p.tf2.name == bias), None)
    if partner is None or partner.shape != kernel.shape[1:] or name_kind(partner.name) == "bias":
        return ""
    return (f". Its layer's bias {bias} was paired with TF1's {partner.name} "
            f"{tuple(partner.shape)}, which is a variable of its own in TF1, no layer's bias: "
            f"TF1 keeps {partner.name} free (a state-independent log_std), where the port "
            "computes it with a layer from the state. Make it a free variable on the TF2 "
            f"side (self.add_weight(shape={tuple(partner.shape)}), tf.Variable), not a "
            "Dense output")


ONE_WITH_ONE = "pgtwin pairs one variable with one"
"""Said in each note of a recurrent cell laid out in other variables on the two sides."""


def _gru_units(tf1_shapes: set[tuple], keras_shapes: set[tuple]) -> int | None:
    """The units of a GRU held as TF1's ``GRUCell`` (``gates/kernel [n, 2u]``,
    ``candidate/kernel [n, u]``, n = inputs + u) among ``tf1_shapes`` and as Keras' ``GRU``
    (``kernel [n - u, 3u]``, ``recurrent_kernel [u, 3u]``) among ``keras_shapes``; else None."""
    for n, k in (s for s in tf1_shapes if len(s) == 2 and s[1] % 2 == 0):
        u = k // 2
        if n > u and (n, u) in tf1_shapes and {(n - u, 3 * u), (u, 3 * u)} <= keras_shapes:
            return u
    return None


def _gru_cell_hint(v: VariableInfo, tf1_left: Sequence[VariableInfo],
                   tf2_left: Sequence[VariableInfo], tf1_side: bool) -> str:
    """The note for ``v`` (a TF1 variable where ``tf1_side``), one of a GRU's that TF1's
    ``GRUCell`` and Keras' ``GRU`` hold in different layouts among the unpaired variables
    of the two sides; else ''."""
    tf1_shapes, keras_shapes = {o.shape for o in tf1_left}, {o.shape for o in tf2_left}
    u = _gru_units(tf1_shapes, keras_shapes)
    if u is None:
        return ""
    n = next(s[0] for s in tf1_shapes if len(s) == 2 and s[1] == 2 * u and (s[0], u) in
             tf1_shapes)
    own = ({(n, 2 * u), (n, u), (2 * u,), (u,)} if tf1_side
           else {(n - u, 3 * u), (u, 3 * u), (3 * u,), (2, 3 * u)})
    if v.shape not in own:
        return ""
    i = n - u
    if (2, 3 * u) in keras_shapes:
        return (f". One GRU of {u} units: the Keras GRU's bias is [2, {3 * u}], so it has "
                "reset_after=True (Keras' default), which applies the reset gate after the "
                "candidate's recurrent matmul: another function than TF1's GRUCell, which "
                "applies it to the state before. Build it with GRU(reset_after=False) (one "
                f"bias of {3 * u}), then pair or convert the weights")
    return (f". One GRU of {u} units, laid out otherwise on each side: TF1's GRUCell holds "
            f"gates/kernel [{n}, {2 * u}] (the reset gate r, then the update gate u) and "
            f"candidate/kernel [{n}, {u}], each with a bias, their rows acting on [inputs "
            f"({i}), state ({u})]; Keras' GRU holds kernel [{i}, {3 * u}] and "
            f"recurrent_kernel [{u}, {3 * u}], the gates in the order z (TF1's u), r, h, and "
            "one bias. TF1 applies the reset gate to the state before the candidate's matmul: "
            "Keras' GRU(reset_after=False) does the same, its default reset_after=True "
            "computes another function. TF1 also starts the gate bias at 1.0. "
            f"{ONE_WITH_ONE}: to compare, write the cell by hand with TF1's variables, or "
            "convert them (kernel = the columns [u | r | candidate] of TF1's first "
            f"{i} rows, recurrent_kernel the same of its last {u}, bias = [u | r | "
            "candidate]) and compare the outputs")


def _axes_hint(a: VariableInfo, others: Sequence[VariableInfo], side: str) -> str:
    """The note where an unpaired variable on the other ``side`` holds as many values as
    ``a`` in a shape that differs by axes of size 1 only (a Gaussian's ``log_std`` of shape
    ``()`` against ``(1,)``); else ''."""
    squeezed = tuple(d for d in a.shape if d != 1)
    alike = [o for o in others if o.shape != a.shape
             and tuple(d for d in o.shape if d != 1) == squeezed]
    if not alike:
        return ""
    tf1_shape = a.shape if side == "TF2" else alike[0].shape
    return (f". {side}'s {_describe(alike[:1])} holds as many values in a shape that differs "
            f"by axes of size 1 only: give the TF2 variable TF1's shape {tf1_shape}"
            + (" (tf.Variable(0.0), add_weight(shape=()))" if tf1_shape == () else ""))


def _fused_cell_hint(a: VariableInfo, rest2: Sequence[VariableInfo]) -> str:
    """The note for a TF1 recurrent cell's one kernel ``[inputs + units, 4 units]``
    (``LSTMCell``, ``BasicLSTMCell``) when the TF2 side has Keras' two, ``kernel [inputs,
    4 units]`` and ``recurrent_kernel [units, 4 units]``; else ''."""
    if len(a.shape) != 2 or a.shape[1] % 4:
        return ""
    units = a.shape[1] // 4
    shapes = {c.shape for c in rest2}
    if (a.shape[0] - units, a.shape[1]) not in shapes or (units, a.shape[1]) not in shapes:
        return ""
    return (f". It is a TF1 LSTM cell's one kernel: its first {a.shape[0] - units} rows act "
            f"on the inputs, its last {units} on the state, like Keras' kernel and "
            "recurrent_kernel. The two also order the gates differently (TF1 i, j, f, o; "
            "Keras i, f, c, o) and TF1 adds the cell's forget_bias (1.0 unless the cell was "
            "given another) at run time, which Keras keeps in the bias (unit_forget_bias "
            f"initialises it): the bias of shape ({a.shape[1]},) pairs by shape but not gate "
            f"by gate. {ONE_WITH_ONE}: to compare, write the cell by hand with TF1's "
            "variables (a keras.layers.RNN over a cell of your own), or convert the weights "
            "by splitting the rows, reordering the columns and adding the forget_bias to the "
            "forget gate's bias, then compare the outputs")


def _why_unpaired(a: VariableInfo, rest1: Sequence[VariableInfo],
                  rest2: Sequence[VariableInfo]) -> str:
    """Why TF1 variable ``a`` is left: ambiguous candidates, another kind, or no shape."""
    same = [c for c in rest2 if c.shape == a.shape]
    fitting = [c for c in same if _token(c) == _token(a)]
    rivals = [x for x in rest1 if x.name != a.name and _token(x) == _token(a)]
    what = kind(a.name, a.shape)
    if len(fitting) > 1:
        return f"ambiguous: it could be any of {_describe(fitting)}"
    if fitting and not rivals and _numbered_apart(_name_parts(a.name)[1],
                                                  _name_parts(fitting[0].name)[1]):
        return (f"{_describe(fitting)} is the only TF2 {what} of this shape left, but the two "
                "scopes number the layer differently (a 1-based and a 0-based count?): if "
                "they are one layer, pair them with --map (name_map)")
    if fitting:
        return (f"ambiguous: {_describe(fitting)} is the only TF2 {what} of this shape left, "
                f"and {_describe(rivals)} fit it too")
    if same:
        return (f"no TF2 {what} of shape {a.shape} is left; only {_describe(same)} (a {what} "
                f"is not paired with a {kind(same[0].name, same[0].shape)})")
    return f"no TF2 variable of shape {a.shape} is left (unpaired TF2: {_describe(rest2)})"


def _flattened_size_hint(a: VariableInfo, rest2: Sequence[VariableInfo]) -> str:
    """The note for a dense kernel after a flatten whose input count differs from an
    unpaired TF2 kernel's with the same outputs by the spatial size of a conv layer's
    output (``800 = 5 x 5 x 32`` against ``512 = 4 x 4 x 32``: padding 'same' against
    'valid', or another stride, in a conv layer before it); else ''."""
    if len(a.shape) != 2:
        return ""
    for c in rest2:
        if len(c.shape) != 2 or c.shape[1] != a.shape[1] or c.shape[0] == a.shape[0]:
            continue
        for channels in sorted(_divisors(math.gcd(a.shape[0], c.shape[0])), reverse=True):
            sides = [math.isqrt(n // channels) for n in (a.shape[0], c.shape[0])]
            if channels > 1 and all(s * s * channels == n and s > 1
                                    for s, n in zip(sides, (a.shape[0], c.shape[0]))):
                return (f". {a.name} takes {a.shape[0]} = {sides[0]} x {sides[0]} x "
                        f"{channels} inputs and {c.name} {c.shape[0]} = {sides[1]} x "
                        f"{sides[1]} x {channels}: the flattened output of a conv layer "
                        f"{sides[0]} x {sides[0]} in TF1 and {sides[1]} x {sides[1]} in TF2. "
                        "Check the padding ('same' or 'valid') and strides of the conv "
                        "layers before it")
    return ""


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` (n >= 1)."""
    return [d for d in range(1, n + 1) if n % d == 0]


_ONE_SIDE_FIX = {
    "bias": ("bias", "build the Keras layer with use_bias=False (or give the TF1 layer a "
                     "bias)"),
    "scale": ("scale (gamma)", "build the Keras normalisation with scale=False (tf_slim's "
                               "batch_norm has none by default: scale=False)"),
    "offset": ("offset (beta)", "build the Keras normalisation with center=False"),
}
"""Per kind a layer may lack: what to call it, and the Keras setting that leaves it out."""


def _gru_bias_hint(v: VariableInfo, other_side_left: Sequence[VariableInfo]) -> str:
    """The note for a GRU bias of shape ``(3 units,)`` on one side and ``(2, 3 units)`` on
    the other: ``reset_after`` differs (False in TF1's ``tf.keras`` GRU, True by default
    in TF2's, which keeps one bias for the inputs and one for the recurrent part); else ''."""
    for o in other_side_left:
        if name_kind(o.name) != "bias":
            continue
        flat, stacked = sorted((v.shape, o.shape), key=len)
        if len(flat) == 1 and stacked == (2, *flat) and flat[0] % 3 == 0:
            return (f". A GRU's bias: shape {flat} is a GRU with reset_after=False (the default "
                    f"of TF1's tf.keras GRU), shape {stacked} one with reset_after=True (TF2's "
                    "default: a bias for the inputs and one for the recurrent part, the reset "
                    "gate applied after the recurrent matmul). Build the Keras GRU with the "
                    "TF1 layer's reset_after; the two compute different functions otherwise")
    return ""


def _bias_hint(v: VariableInfo, other_side_left: Sequence[VariableInfo],
               other_side: Sequence[VariableInfo]) -> str:
    """The fix for a bias, or a normalisation's scale or offset, that only one side has
    (``use_bias``, ``scale``, ``center``); where the other side has one of this shape but
    it is paired already, the likelier cause (a layer one side shares and the other builds
    twice); else ''."""
    k = name_kind(v.name)
    gru = _gru_bias_hint(v, other_side_left) if k == "bias" else ""
    if gru:
        return gru

    def alike(others):
        return [o for o in others if kind(o.name, o.shape) == k and o.shape == v.shape]
    if k not in _ONE_SIDE_FIX or alike(other_side_left):
        return ""
    what, fix = _ONE_SIDE_FIX[k]
    taken = alike(other_side)
    if taken:
        return (f". Every {what} of shape {v.shape} on the other side is paired already "
                f"({_describe(taken)}): if one side shares a layer (reuse=True, a Keras "
                "layer called twice) that the other builds twice, share it on both")
    return (f". The other side has no {what} of shape {v.shape}: if that layer has none, "
            f"{fix}; nothing is invented for a variable that does not exist")
