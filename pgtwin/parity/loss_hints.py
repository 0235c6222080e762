"""What a differing loss most likely means, read from the numbers.

When the two losses part, the usual migration mistakes leave fingerprints:

* **sum vs mean**: TF2 / TF1 equals the batch size (or its inverse), or another size
  of the inputs' leading dimensions (``T``, ``N``, ``T*N``);
* **sign**: the ratio is -1;
* **the wrong TF1 tensor named**: ``TF1Program.loss`` is not what TF1's ``train_op``
  differentiates (the policy term named where ``minimize`` takes the loss with its entropy
  bonus): the tensor it does differentiate (:func:`minimised_tensors`) has the TF2 loss's
  value;
* **a term's coefficient**: the gap is one of the TF1 loss's terms (``c * x`` in its top
  sum) times a change of its coefficient to a round number: 0 (the entropy bonus left
  out), twice, or another (a value coefficient of 1.0 where TF1's is 0.5)
  (:func:`term_hint`);
* **from_logits / double softmax**: the TF1 graph's own softmax step, re-run on what a
  mistaken migration feeds it, gives the TF2 loss. The TF1 loss's log-softmax,
  softmax or softmax-cross-entropy op is found in its graph, and the Session is asked
  for the loss with that op's output replaced (a Session can feed any tensor) by:
  ``log_softmax(softmax(z))`` (a softmax applied twice: a ``softmax`` activation on the
  last layer and a loss that takes logits), or what Keras' crossentropies make of logits
  with ``from_logits=False``, their default (sparse: ``log(clip(z) / sum clip(z))``;
  categorical: ``log(clip(z / sum z))``). A TF2 loss equal to one of those names the
  mistake.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import numpy as np
import tensorflow as tf

from pgtwin_core.sampling import log_softmax
from pgtwin.parity.graph_walk import upstream_ops
from pgtwin.parity.tf1_side import TF1Side, held_name

_SOFTMAX_OPS = {"LogSoftmax", "Softmax", "SparseSoftmaxCrossEntropyWithLogits",
                "SoftmaxCrossEntropyWithLogits"}
_EPS = 1e-7  # Keras' backend epsilon, used to clip probabilities when from_logits=False


def _close(a: float, b: float, rtol: float) -> bool:
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) <= rtol * max(abs(a), abs(b)))


def ratio_hint(tf1_loss: float, tf2_loss: float, sizes: Iterable[int], rtol: float) -> str:
    """The sum-vs-mean or sign hint for the two losses, or ''."""
    if tf1_loss == 0 or not np.isfinite(tf1_loss) or not np.isfinite(tf2_loss):
        return ""
    ratio = tf2_loss / tf1_loss
    for n in sorted({int(s) for s in sizes if s and s > 1}):
        if _close(ratio, n, rtol):
            return (f"the TF2 loss is {n}x the TF1 loss: a sum where TF1 takes a mean "
                    f"(reduce_sum vs reduce_mean, or a Keras loss with reduction='sum') over "
                    f"a dimension of size {n}")
        if _close(ratio, 1.0 / n, rtol):
            return (f"the TF2 loss is 1/{n} of the TF1 loss: a mean where TF1 takes a sum "
                    f"over a dimension of size {n}")
    if _close(ratio, -1.0, rtol):
        return "the TF2 loss is minus the TF1 loss: a sign was dropped (maximising vs minimising)"
    return ""


def _sparse_from_logits_false(z: np.ndarray) -> np.ndarray:
    """Log-probs Keras' *sparse* crossentropy makes of ``z`` with ``from_logits=False``.

    Keras 3 and tf_keras clip to ``[eps, 1 - eps]``, take the log and hand that to
    ``sparse_softmax_cross_entropy_with_logits``: ``log(clip(z) / sum clip(z))``.
    """
    return log_softmax(np.log(np.clip(z, _EPS, 1 - _EPS)))


def _categorical_from_logits_false(z: np.ndarray) -> np.ndarray:
    """Log-probs Keras' categorical crossentropy makes of ``z``: ``log(clip(z / sum z))``."""
    return np.log(np.clip(z / z.sum(axis=-1, keepdims=True), _EPS, 1 - _EPS))


_MISTAKES = {
    "double softmax": lambda z: log_softmax(np.exp(log_softmax(z))),
    "from_logits": _sparse_from_logits_false,
    "from_logits (categorical)": _categorical_from_logits_false,
}
_FIXES = {
    "double softmax": "the TF2 loss equals TF1's with a softmax applied twice: "
                      "probabilities (a softmax activation on the model's last layer, or a "
                      "softmax in the loss code) are taken as logits by the loss. Drop one of "
                      "the two softmaxes",
    "from_logits": "the TF2 loss equals TF1's computed from the logits taken as "
                   "probabilities: a Keras crossentropy left at its default "
                   "from_logits=False. Pass from_logits=True",
}


def softmax_hint(tf1: TF1Side, tf2_loss: float, rtol: float, tf1_loss: float) -> str:
    """The double-softmax or ``from_logits`` hint, when re-running TF1 that way gives TF2.

    Each softmax-family op is tried alone, then all of those on the same logits together
    (a model whose last layer became a softmax feeds probabilities to every one of them:
    the crossentropy and an entropy bonus alike). A re-run must land on TF2's loss to
    ``rtol`` *and* explain the gap (within 1 % of ``tf1_loss - tf2_loss``): in a loss that
    other terms dominate (an actor-critic's value loss) any change to the policy term is
    within ``rtol`` of the total.
    """
    ops = _softmax_ops(tf1)
    groups: dict[tf.Tensor, list[tf.Operation]] = {}
    for op in ops:
        groups.setdefault(op.inputs[0].ref(), []).append(op)
    trials = [[op] for op in ops] + [g for g in groups.values() if len(g) > 1]
    for mistake, wrong_log_p in _MISTAKES.items():
        for trial in trials:
            feed = {}
            for op in trial:
                if mistake != "double softmax" and op.type == "Softmax":
                    continue  # from_logits=False concerns the loss, not a softmax of its own
                feed.update(_replacement(tf1, op, wrong_log_p))
            if not feed:
                continue
            try:
                value = float(tf1.session.run(tf1.loss, {**tf1.feed, **feed}))
            except (tf.errors.OpError, ValueError):
                continue
            if _close(value, tf2_loss, rtol) and \
                    abs(value - tf2_loss) <= 0.01 * abs(tf1_loss - tf2_loss):
                return _FIXES[mistake.split(" (")[0]]
    return ""


def _replacement(tf1: TF1Side, op: tf.Operation, wrong_log_p) -> dict:
    """``{op's output: what it would be}`` when its logits went through ``wrong_log_p``."""
    z = tf1.session.run(op.inputs[0], tf1.feed).astype(np.float64)
    with np.errstate(all="ignore"):
        log_p = wrong_log_p(z)
    if op.type == "LogSoftmax":
        value = log_p
    elif op.type == "Softmax":
        value = np.exp(log_p)
    elif op.type == "SparseSoftmaxCrossEntropyWithLogits":
        labels = tf1.session.run(op.inputs[1], tf1.feed)
        value = -np.take_along_axis(log_p, labels[:, None], 1)[:, 0]
    else:  # SoftmaxCrossEntropyWithLogits: labels are probabilities
        labels = tf1.session.run(op.inputs[1], tf1.feed)
        value = -(labels * log_p).sum(axis=-1)
    out = op.outputs[0]
    return {out: value.astype(out.dtype.as_numpy_dtype)}


def _softmax_ops(tf1: TF1Side) -> list[tf.Operation]:
    """The softmax-family ops the TF1 loss depends on, nearest the loss first."""
    return [op for op in upstream_ops(tf1.loss, control=False, stop=_is_softmax)
            if _is_softmax(op)]


def _is_softmax(op: tf.Operation) -> bool:
    return op.type in _SOFTMAX_OPS


def regularization_hint(tf1: TF1Side, tf1_loss: float, tf2_loss: float) -> str:
    """The note when the two losses part by TF1's regularization loss (the
    ``REGULARIZATION_LOSSES`` collection: ``kernel_regularizer``, ``tf_slim``'s
    ``weights_regularizer``): left out of the TF2 loss, or counted twice. TF1's
    ``l2_regularizer(s)`` is ``s * sum(w ** 2) / 2`` (``tf.nn.l2_loss``); Keras'
    ``regularizers.l2(s)`` is ``s * sum(w ** 2)``, so the same ``s`` doubles it."""
    with tf1.graph.as_default():
        terms = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
        if not terms:
            return ""
        total = tf.math.add_n(terms) if len(terms) > 1 else terms[0]
    r = float(tf1.session.run(total, tf1.feed))
    gap = tf2_loss - tf1_loss
    if r == 0.0:
        return ""
    if abs(gap + r) <= 1e-3 * abs(r):
        return (f"the TF2 loss is TF1's less its regularization loss ({r:.6g}, "
                "tf.losses.get_regularization_loss()): add the model's losses (sum(model."
                "losses)) to the TF2 loss")
    if abs(gap - r) <= 1e-3 * abs(r):
        return (f"the TF2 loss is TF1's plus its regularization loss once more ({r:.6g}): "
                "TF1's l2_regularizer(s) is s * sum(w ** 2) / 2 and Keras' l2(s) is "
                "s * sum(w ** 2): build the Keras regularizer with l2(s / 2)")
    if abs(gap + r / 2) <= 1e-3 * abs(r):
        names = ", ".join(t.op.name for t in terms[:3]) + (", ..." if len(terms) > 3 else "")
        return (f"the TF2 loss holds half of TF1's regularization loss ({r:.6g}: {names}): "
                "TF1's regularizer is s * sum(w ** 2) (a Keras l2(s), as tf.keras."
                "regularizers.l2 is) where the port's is s * tf.nn.l2_loss(w) = s * sum(w ** 2) "
                "/ 2: write 2 * s * tf.nn.l2_loss(w), or keras.regularizers.L2(s) on the layers "
                "with sum(model.losses)")
    return ""


def minimised_tensors(train_op) -> list[tf.Tensor]:
    """The tensors the TF1 ``train_op`` differentiates (``minimize``'s and
    ``compute_gradients``' loss), read from its gradients' graph: ``tf.gradients(y, ...)``
    fills ``grad_ys_i`` (a ``Fill`` under ``gradients/``, itself maybe under the scope
    ``minimize`` was called in) and hands it to the gradient of y's op, in the scope
    ``gradients/<y's op>_grad/``; its name gives y. An ``Identity``
    has no gradient op of its own, so an identity of the loss gives the op it reads: the
    same value."""
    if train_op is None:
        return []
    found = {}
    for op in upstream_ops(train_op):
        if op.type != "Fill" or "/grad_ys_" not in op.name:
            continue
        for user in (c for t in op.outputs for c in t.consumers()):
            parts = user.name.split("/")  # [outer scopes..., gradients, y's op..., *_grad, op]
            first = next((i for i, p in enumerate(parts) if p.startswith("gradients")), None)
            scope = "/".join(parts[first + 1:]) if first is not None else ""
            if "_grad/" not in scope:
                continue
            try:
                y = op.graph.get_operation_by_name(scope.rsplit("_grad/", 1)[0])
            except KeyError:
                continue
            if y.outputs:
                found.setdefault(y.outputs[0].name, y.outputs[0])
            break
    return list(found.values())


def minimised_hint(tf1: TF1Side, tf2_loss: float, rtol: float) -> str:
    """The note when ``TF1Program.loss`` is not among the tensors TF1's ``train_op``
    minimises (:func:`minimised_tensors`) and one of those, or their sum, has the TF2
    loss's value: the TF2 loss is then the one TF1 trains on, and the TF1 side was
    described with the wrong tensor. '' otherwise."""
    ys = minimised_tensors(getattr(tf1, "train_op", None))
    if not ys or any(y is tf1.loss or y.name == tf1.loss.name for y in ys):
        return ""
    values = [float(np.sum(v)) for v in tf1.session.run(ys, tf1.feed)]
    candidates = list(zip([y.name for y in ys], values))
    if len(ys) > 1:
        candidates.append((" + ".join(y.name for y in ys), float(np.sum(values))))
    for name, value in candidates:
        if _close(value, tf2_loss, rtol):
            return (f"TF1Program.loss ({tf1.loss.name}) is not what TF1's train_op "
                    f"minimises: it differentiates {name}, whose value {value:.6g} is the "
                    "TF2 loss's: name that tensor as TF1Program.loss")
    return ""


_SUMS = {"Add": 1.0, "AddV2": 1.0, "Sub": -1.0}


def _constant(t: tf.Tensor) -> float | None:
    """The value of a scalar constant (through identities and casts), else None."""
    op = t.op
    while op.type in ("Identity", "Cast") and op.inputs:
        op = op.inputs[0].op
    if op.type != "Const" or t.shape.rank not in (0, None):
        return None
    value = tf.make_ndarray(op.get_attr("value"))
    # The shortest decimal that the constant's own dtype holds: a float32 0.01 read as a
    # Python float is 0.009999999776, which no round TF2 coefficient equals (a flipped
    # sign was told as "a coefficient differs" in float32).
    return float(str(value.reshape(())[()])) if value.size == 1 else None


def loss_terms(loss: tf.Tensor, depth: int = 6) -> list[tuple[float, tf.Tensor]]:
    """The TF1 loss as a sum of terms ``c * x``: ``[(c, x)]`` with c the sign and scalar
    constant factor of each summand of its top ``Add``/``Sub``/``AddN``/``Neg`` tree, x
    what that constant multiplies (the summand itself where none does)."""
    def terms(t: tf.Tensor, c: float, depth: int) -> list[tuple[float, tf.Tensor]]:
        op = t.op
        if depth and op.type in _SUMS:
            return (terms(op.inputs[0], c, depth - 1)
                    + terms(op.inputs[1], c * _SUMS[op.type], depth - 1))
        if depth and op.type == "AddN":
            return [x for i in op.inputs for x in terms(i, c, depth - 1)]
        if depth and op.type == "Neg":
            return terms(op.inputs[0], -c, depth - 1)
        if op.type == "Mul":
            for k, other in ((0, 1), (1, 0)):
                factor = _constant(op.inputs[k])
                if factor is not None:
                    return [(c * factor, op.inputs[other])]
        return [(c, t)]
    return terms(loss, 1.0, depth)


def _round(x: float, tol: float, c: float) -> float | None:
    """A number of at most two significant digits (or 0) within ``tol`` of ``x``, where
    ``tol`` is small enough to tell it from its neighbours (0: from the coefficient ``c``
    it replaces), else None."""
    if abs(x) <= tol:
        return 0.0 if tol <= 1e-2 * abs(c) else None
    r = float(f"{x:.2g}")
    return r if abs(x - r) <= tol and tol <= 1e-3 * abs(r) else None


def batch_counts(fed: Mapping[str, np.ndarray], read: Collection[str] | None = None
                 ) -> dict[int, str]:
    """``{count: what it counts}`` of the batch that a mean may divide by: each input's rows,
    the B x T entries of sequences (inputs ``[B, T, ...]`` where one has three axes or
    more), a float vector's or ``[B, T]`` mask's nonzero entries, the sum of an integer
    vector of sequence lengths (the real steps of padded sequences), and the rows where two
    float vectors of one length are both nonzero (TF1's ``tf.compat.v1.losses`` divide by
    the nonzero weights, such as ``advantages * mask``, by default). A count several inputs
    give names up to two, those of the inputs in ``read`` (the ones TF1 feeds) first and
    alone where any is (a count named by an input only the TF2 side takes read as TF1's
    divisor)."""
    arrays = {k: np.asarray(v) for k, v in fed.items() if np.ndim(v) >= 1}
    found: dict[int, list[str]] = {}
    for k, a in arrays.items():
        found.setdefault(int(a.shape[0]), []).append(f"the rows of inputs[{k!r}]")
    # sequences: [B, T] as an input of three axes or more has them (observations [B, T, F])
    grids = {tuple(int(d) for d in a.shape[:2]) for a in arrays.values() if a.ndim >= 3}
    for k, a in arrays.items():  # their B x T steps, and a 0/1 [B, T] mask's ones
        if a.ndim >= 2 and tuple(a.shape[:2]) in grids:
            found.setdefault(int(a.shape[0] * a.shape[1]), []).append(
                f"the {a.shape[0]} x {a.shape[1]} entries of inputs[{k!r}]")
            if a.ndim == 2 and a.dtype.kind == "f" and 0 < np.count_nonzero(a) < a.size:
                found.setdefault(int(np.count_nonzero(a)), []).append(
                    f"the nonzero entries of inputs[{k!r}]")
    for k, a in arrays.items():  # sequence lengths: the real steps of padded sequences
        if a.ndim == 1 and a.dtype.kind in "iu" and a.size and 0 <= a.min() and any(
                b == a.size and a.max() <= t for b, t in grids) and a.sum() > 0:
            found.setdefault(int(a.sum()), []).append(
                f"the steps inputs[{k!r}] counts (its sum)")
    vectors = {k: a for k, a in arrays.items() if a.dtype.kind == "f" and a.ndim == 1}
    for k, a in vectors.items():
        n = int(np.count_nonzero(a))
        if 0 < n < a.size:
            found.setdefault(n, []).append(f"the nonzero entries of inputs[{k!r}]")
    keys = list(vectors)
    for i, k1 in enumerate(keys):
        for k2 in keys[i + 1:]:
            n = int(np.count_nonzero(vectors[k1] * vectors[k2])) \
                if vectors[k1].shape == vectors[k2].shape else 0
            if 0 < n < vectors[k1].size and n not in found:
                found[n] = [f"the rows where inputs[{k1!r}] and inputs[{k2!r}] are both "
                            "nonzero"]
    if read is not None:
        tf1s = {f"inputs[{k!r}]" for k in read}
        found = {n: [w for w in what if any(k in w for k in tf1s)] or what
                 for n, what in found.items()}
    return {n: ", ".join(what[:2]) + (", ..." if len(what) > 2 else "")
            for n, what in found.items()}


def untested_reduction_note(tf1: TF1Side, fed: Mapping[str, np.ndarray]) -> str:
    """Where TF1's loss divides by a count of nonzero weights (``tf.compat.v1.losses``'
    ``num_present``, their default reduction) that on this batch equals the rows or a 0/1
    input's ones: a port that divides by that count instead passes on it (a helper's port
    dividing by ``sum(mask)`` passed, and failed on a batch with an advantage of 0), so
    the warning says to compare on a batch where they differ; '' otherwise."""
    present = [op.outputs[0] for op in upstream_ops(tf1.loss)
               if op.name.split("/")[-1] == "num_present" and op.type == "Sum"]
    if not present:
        return ""
    arrays = {k: np.asarray(v) for k, v in fed.items() if np.ndim(v) >= 1}
    plain = {int(a.shape[0]): (f"the rows of inputs[{k!r}]", None) for k, a in arrays.items()}
    plain.update({int(np.count_nonzero(a)): (f"the ones of inputs[{k!r}]", k)
                  for k, a in arrays.items() if a.size and np.isin(a, (0, 1)).all()})
    for tensor, n in zip(present, tf1.session.run(present, tf1.feed)):
        if int(n) not in plain:
            continue
        what, key = plain[int(n)]
        # the Sum counts broadcast_weights = (weights != 0) * ones_like(losses): its first
        # input's inputs are the weights (the losses only give the shape)
        counted = tensor.op.inputs[0]
        ops = set(upstream_ops(counted.op.inputs[0] if counted.op.type == "Mul" else counted,
                               control=False))  # not the shape checks' control inputs
        # weights that are that 0/1 input itself (a value loss weighted by the mask), or a
        # constant, always count the same: only other inputs in the weights can differ
        if {k for k, p in tf1.placeholders.items() if p.op in ops} - {key}:
            return (f"WARNING TF1's {tensor.op.name.rsplit('/', 1)[0]} divides by its "
                    f"nonzero weights, {int(n)} on this batch, which is also {what}: a port "
                    "that divides by that instead passes here. Compare on a batch where some "
                    "weights are 0 on those rows too (an advantage of exactly 0)")
    return ""


def count_ratio(ratio: float, counts: Mapping[int, str], rtol: float
                ) -> tuple[int, int] | None:
    """``(p, q)``: two different counts of the batch whose quotient ``p / q`` is ``ratio``
    (to ``rtol``), where no other pair is that close (two pairs of one quotient, 4/6 and
    6/9, cannot say which counts); else None."""
    close = [(p, q) for p in counts for q in counts
             if p != q and q and abs(ratio - p / q) <= rtol * max(1.0, abs(ratio))]
    return close[0] if len(close) == 1 else None


def divisor_note(tf1_divides: int, tf2_divides: int, counts: Mapping[int, str],
                 tf1_tensor: tf.Tensor | None) -> str:
    """Why TF1 divides by one count and the TF2 side by another, with TF1's default
    reduction named where ``tf1_tensor`` is computed through ``tf.compat.v1.losses``'
    count of nonzero weights (its ``num_present`` ops)."""
    reduction = tf1_tensor is not None and any(
        "num_present" in op.name for op in upstream_ops(tf1_tensor))
    return (f"TF1's divides by {tf1_divides} ({counts[tf1_divides]}) where TF2's divides by "
            f"{tf2_divides} ({counts[tf2_divides]})"
            + (": TF1's tf.compat.v1.losses divide by the count of nonzero weights by default "
               "(Reduction.SUM_BY_NONZERO_WEIGHTS): divide the weighted sum by "
               "tf.math.count_nonzero(weights) as it does" if reduction else ""))


def _named_change(x: float, tol: float, c: float) -> float | None:
    """The coefficient ``x`` as one of the changes a port makes to ``c`` (left out 0,
    doubled, sign flipped, halved) where it is within ``tol`` of it and ``tol`` is small
    against ``c`` (a specific guess needs less margin than any two-digit number: a float32
    loss's rounding hid an L2 term doubled at 1e-4); else None."""
    if tol > 1e-2 * abs(c):
        return None
    return next((k for k in (2 * c, -c, 0.5 * c) if abs(x - k) <= tol), None)


def term_hint(tf1: TF1Side, tf1_loss: float, tf2_loss: float, rtol: float,
              counts: Mapping[int, str] | None = None) -> str:
    """The note when the TF2 loss is TF1's with one term's coefficient changed to a round
    number (:func:`loss_terms`; the coefficient each term would need, from the gap, within
    what the two losses' rounding allows), or scaled by a quotient of two of the batch's
    ``counts`` (:func:`batch_counts`: one side's mean divides by another count), and no
    other term explains the gap so; '' otherwise."""
    terms = [(c, x) for c, x in loss_terms(tf1.loss) if x.shape.rank == 0]
    if len(terms) < 2:
        return ""
    values = tf1.session.run([x for _, x in terms], tf1.feed)
    gap = tf2_loss - tf1_loss
    found = []
    for (c, x), v in zip(terms, values):
        v = float(v)
        if v == 0.0 or not np.isfinite(v):
            continue
        tol = rtol * max(abs(tf1_loss), abs(tf2_loss)) / abs(v)
        new = _named_change(c + gap / v, tol, c)
        new = _round(c + gap / v, tol, c) if new is None else new
        if new is not None and new != c:
            found.append((c, x, v, f"{new:g}", _why(c, new, x)))
            continue
        pair = None if not counts or tol > 1e-2 * abs(c) else count_ratio(
            (c + gap / v) / c, counts, tol / abs(c))
        if pair is not None:
            found.append((c, x, v, f"{c:g} x {pair[0]}/{pair[1]}",
                          ": " + divisor_note(*pair, counts, x)))
    if not found or len(found) > 3:
        return ""
    told = [f"TF1's term {_term_name(tf1, x)} ({v:.6g}) {new} where TF1 weights it {c:g}{why}"
            for c, x, v, new, why in found]
    if len(told) == 1:
        return f"the TF2 loss weights {told[0]}"
    return ("the gap fits more than one term's coefficient changed, so the loss alone cannot "
            f"tell which (add the terms to both sides' outputs to see): the TF2 loss weights "
            f"{', or '.join(told)}")


def _why(c: float, new: float, x: tf.Tensor) -> str:
    """What a coefficient ``c`` of TF1's term ``x`` changed to ``new`` on the TF2 side
    likely is."""
    types = {op.type for op in upstream_ops(x)}
    # a regulariser reads the weights only: a term that reads a placeholder is no penalty
    # (a Gaussian log-density squares too)
    weights_only = not any(t.startswith("Placeholder") for t in types)
    l2_loss = weights_only and "L2Loss" in types  # tf.nn.l2_loss: sum(w^2) / 2
    squares = weights_only and not l2_loss and "Square" in types  # Keras' l2: sum(w^2)
    return (": a term left out of the TF2 loss" if new == 0.0 else
            ": counted twice, or its coefficient doubled" + (L2_TWICE if l2_loss else "")
            if new == 2 * c else
            ": its sign flipped" if new == -c else
            ": halved" + (L2_HALF if squares else "") if new == 0.5 * c else
            ": a coefficient differs")


L2_TWICE = (" (TF1's term is tf.nn.l2_loss, sum(w^2) / 2, and Keras' L2(s) regularizer is "
            "s * sum(w^2): use L2(s / 2), or keep TF1's l2_loss in the loss)")
L2_HALF = (" (TF1's term is s * sum(w^2), tf.keras.regularizers.l2(s), and tf.nn.l2_loss is "
           "sum(w^2) / 2: use 2 s with l2_loss, or keras.regularizers.L2(s))")


def _term_name(tf1: TF1Side, x: tf.Tensor) -> str:
    """``x``'s graph name, after the name the user's code holds it under where it holds it
    (:func:`pgtwin.parity.tf1_side.held_name`): ``v_loss (Mean_1)``."""
    return held_name(getattr(tf1, "obj", None), x)
