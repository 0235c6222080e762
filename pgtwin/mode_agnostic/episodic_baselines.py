"""The episodic optimal baselines as TensorFlow ops, for both twins: one computation per update.

The numpy reference is ``pgtwin_core.baselines`` (the estimator, ``leave_one_out``,
``time_dependent``); the formulas are docs/baselines.md's, in the same order of operations
where it matters (leave-one-out by prefix and suffix sums, ``optimal_time`` by the total less
the episode's own terms). The twins feed the grid of ``pgtwin_core.baselines.episode_layout``
(complete episodes cut into chunks of C steps, ``[K, C]``) and one traced forward and backward
pass over its cells (``per_sample.LayerDeltas``); everything below runs on those tensors, so
a twin compiles it into one XLA computation (``tf.function(jit_compile=True)``: eager calls
it, the graph twin calls it while building its graph, ``legacy_graph.per_sample.xla_compiled``).

Per-episode scores, exactly and without a ``[B, in, out]`` tensor. A dense layer's kernel
score of episode e is ``g_e = sum_{t in e} a_t^T d_t = A_e^T D_e`` (A_e, D_e the episode's
inputs and deltas, ``[T_e, in]`` and ``[T_e, out]``). Ghost norms of the summed deltas are
not enough: ``||A_e^T D_e||_F^2 = sum_{t,s in e} (a_t . a_s)(d_t . d_s)`` needs the whole
``T_e x T_e`` Gram matrices, and ``optimal_per_param`` needs every element of g_e anyway. So
g_e is formed per chunk (``[K, C, in]^T [K, C, out] -> [K, in, out]``, :func:`chunk_scores`)
and summed over each episode's chunks (``unsorted_segment_sum``): per episode, not per step
(E << B), at most C - 1 empty cells per episode. ``optimal_time`` needs the score so far of
every step, ``psi_el``, which is per step by definition: ``[E, H, in, out]`` (cumsum of the
per-step outer products along each episode's row of the grid); its ratios are per (e, l, h).

Memory (``pgtwin_core/baseline_memory.py``): ``num, den, sum_r, count`` as tensors, flat
over the weights in ``spec.weight_shapes()`` order (``[]``; ``[P]``; ``[H_m, P]`` and
``[H_m, 1]`` for ``optimal_time``), zeros when empty (the same bits as no memory: every use
adds them). The new memory ``decay * (M + S)`` is returned for the twin to assign after an
applied update.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from pgtwin_core.specs import PolicySpec

from pgtwin.mode_agnostic.grouped_terms import (GROUP, grouped_ascent_terms, grouped_sums,
                                                 leading_sum, pad_episodes)
from pgtwin.mode_agnostic.grouped_terms import expand_to_rank as _expand
from pgtwin.mode_agnostic.loss import reinforce_loss
from pgtwin.mode_agnostic.per_sample import LayerDeltas
from pgtwin.mode_agnostic.row_blocks import blocks, joined, rows_of


@dataclass(frozen=True)
class EpisodeTensors:
    """``pgtwin_core.baselines.episode_layout.EpisodeLayout`` as tensors (config dtype)."""

    mask: tf.Tensor               # [K, C]
    chunk_episode: tf.Tensor      # int32 [K]
    returns: tf.Tensor            # [E_b], raw
    discounted_rewards: tf.Tensor  # [K, C]
    num_episodes: tf.Tensor       # scalar, E
    num_steps: tf.Tensor          # scalar, sum_e T_e
    scale: tf.Tensor              # scalar
    horizon: tf.Tensor            # int32 scalar: the longest complete episode


@dataclass(frozen=True)
class MemoryTensors:
    """The earlier batches' sums (module doc); ``horizon`` (int32) only for ``optimal_time``:
    rows at or past it hold the padding (num 0, den its last row, sum_r 0)."""

    num: tf.Tensor
    den: tf.Tensor
    sum_r: tf.Tensor
    count: tf.Tensor
    horizon: tf.Tensor | None = None


@dataclass(frozen=True)
class EpisodicResult:
    """One update's estimate: what the twin applies, reports and remembers."""

    loss: tf.Tensor        # the reported loss (at R_e - b*_e, or the surrogate at R_e - <R>)
    grads: list[tf.Tensor]  # the loss gradient, spec.weight_shapes() order (no entropy bonus)
    entropy: tf.Tensor     # sum_i w_i H_i
    baseline: tf.Tensor    # the logged plug-in baseline (normalised units)
    memory: MemoryTensors  # decay * (M + S)
    sums_finite: tf.Tensor  # bool: S is finite (a non-finite sum never enters the memory)


MEMORY_FIELDS = ("num", "den", "sum_r", "count")


def memory_variables(kind: str, width: int, empty: dict, dtype: str) -> dict[str, tf.Variable]:
    """The memory's variables (``num``, ``den``, ``sum_r``, ``count``; ``horizon`` for
    ``optimal_time``, whose sums have a dynamic number of rows), made in the current graph
    or eagerly under the current name scope, holding ``empty`` (``HeldMemory.empty()``)."""
    rows = [None] if kind == "time" else []
    shapes = {"num": rows + ([width] if kind != "scalar" else []),
              "sum_r": rows + ([1] if rows else []), "count": []}
    shapes["den"] = shapes["num"]
    out = {f: tf.Variable(np.asarray(empty[f], dtype), name=f, trainable=False,
                          shape=tf.TensorShape(shapes[f])) for f in MEMORY_FIELDS}
    if kind == "time":
        out["horizon"] = tf.Variable(np.int32(0), name="horizon", trainable=False)
    return out


def read_memory(variables: dict[str, tf.Variable]) -> MemoryTensors:
    """The memory variables' values as :class:`MemoryTensors`."""
    return MemoryTensors(*(variables[f].read_value() for f in MEMORY_FIELDS),
                         horizon=variables["horizon"].read_value() if "horizon" in variables
                         else None)


def memory_rows(variables: dict[str, tf.Variable]) -> tuple[tf.Tensor, tf.Tensor]:
    """``optimal_time``'s ``(shape of num, horizon)`` (int32 ``[2]`` and ``[]``), read without
    the sums (``HeldMemory``'s ``read_rows``; ``tf.shape`` of a variable reads its value):
    values eagerly, tensors to run in a graph. Index the shape in numpy: an eager
    ``__getitem__`` costs more than the read."""
    return (tf.raw_ops.VariableShape(input=variables["num"].handle),
            variables["horizon"].read_value())


def rows_held(memory: MemoryTensors, rows: tf.Tensor, horizon: tf.Tensor) -> tf.Tensor:
    """Whether ``optimal_time``'s ``memory`` (as read for this update) has ``rows`` rows and
    horizon ``horizon`` (int32 scalars): the host's record the grid was laid out for
    (``HeldMemory.held_rows``), which a write it did not see (a checkpoint restore) leaves
    stale. A scalar bool; true for the other baselines, whose sums have a fixed shape."""
    if memory.horizon is None:
        return tf.constant(True)
    return tf.logical_and(tf.equal(tf.shape(memory.num)[0], rows),
                          tf.equal(memory.horizon, horizon))


def rows_after(memory: MemoryTensors, new: MemoryTensors, assigned: tf.Tensor
               ) -> tuple[tf.Tensor, tf.Tensor]:
    """``optimal_time``'s ``(rows, horizon)`` (int32 scalars) in the memory's variables after
    an update that read ``memory`` and assigned ``new`` where ``assigned``: what the host
    records for the next update (``HeldMemory.remember_rows``), so that it need not read
    them. Zeros for the other baselines."""
    if memory.horizon is None:
        return tf.constant(0), tf.constant(0)
    return (tf.where(assigned, tf.shape(new.num)[0], tf.shape(memory.num)[0]),
            tf.where(assigned, new.horizon, memory.horizon))


def assign_memory(variables: dict[str, tf.Variable], new: MemoryTensors) -> tf.Operation:
    """Assign :class:`MemoryTensors` to the memory variables."""
    values = dict(zip(MEMORY_FIELDS, (new.num, new.den, new.sum_r, new.count)))
    if new.horizon is not None:
        values["horizon"] = new.horizon
    return tf.group(*[variables[f].assign(x) for f, x in values.items()])


def _others(x: tf.Tensor) -> tf.Tensor:
    """``out[e] = sum_{e' != e} x[e']`` over axis 0, as the total less x[e] (the numpy
    reference's prefix and suffix sums, ``leave_one_out.others``, cost E times the work in
    XLA, whose ``cumsum`` is a reduce window over all E terms). An element only episode e
    touches still gives exactly 0 for e (the total is then x[e] itself); the rounding of the
    total is what the twins' 1e-10 agreement with the reference allows for."""
    return tf.reduce_sum(x, axis=0, keepdims=True) - x


def _ratio_or(num: tf.Tensor, den: tf.Tensor, fallback: tf.Tensor) -> tf.Tensor:
    """``num / den`` where ``den > 0``, else ``fallback`` (broadcast); no 0/0 in either branch."""
    positive = den > 0
    safe = tf.where(positive, den, tf.ones_like(den))
    return tf.where(positive, num / safe, tf.broadcast_to(fallback, tf.shape(num)))


def _safe_div(x: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
    """``x / count`` if ``count > 0``, else zeros (a lone episode and no memory)."""
    return tf.where(count > 0, x / tf.where(count > 0, count, tf.ones_like(count)),
                    tf.zeros_like(x))


def _cells(x: tf.Tensor, grid: tf.Tensor) -> tf.Tensor:
    """``[R, ...] -> [K, C, ...]``: rows of the grid's cells, row-major."""
    return tf.reshape(x, tf.concat([tf.shape(grid), tf.shape(x)[1:]], 0))


def _per_step_pieces(spec: PolicySpec, traced: LayerDeltas, mask: tf.Tensor):
    """Per weight (``spec.weight_shapes()`` order): ``(a, d)`` with a ``[K, C, (W,) in]``,
    d ``[K, C, (W,) out]`` masked (empty cells 0), ``a = None`` for a bias, ``d`` the score
    itself for log_std. ``W``: the LSTM window's steps."""
    out = {}
    for layer, delta in zip(traced.layers, traced.deltas):
        d = _cells(delta, mask)
        d = d * _expand(mask, d.shape.rank)
        out[layer.kernel] = (_cells(layer.inputs, mask), d)
        out[layer.bias] = (None, d)
    if traced.log_std_grads is not None:
        out["policy/log_std"] = (None, _cells(traced.log_std_grads, mask) * mask[:, :, None])
    return [out[name] for name in spec.weight_shapes()]


NARROW = 8
"""A kernel with at most this many inputs or outputs has its chunk scores formed as a
broadcast product even without XLA (:func:`chunk_scores`): the product is then at most
NARROW times the larger of its operands."""


def chunk_scores(a: tf.Tensor, d: tf.Tensor, fused: bool) -> tf.Tensor:
    """``[K, in, out]``: ``sum_c a[k, c]^T d[k, c]``, a dense kernel's score of each chunk,
    from ``a [K, C, in]`` and ``d [K, C, out]``.

    Under XLA (``fused``) a broadcast product summed over the chunk's C steps: XLA emits it as
    one loop that never writes the ``[K, C, in, out]`` product. A batched matmul instead runs
    one small matrix product per chunk, at a fixed cost of a few microseconds each, which for
    a narrow layer (out = 2, or the 4 observations of CartPole) is nearly all of its time
    (docs/benchmarks.md section 6, thirty-sixth session). Without XLA the product would be
    written out whole, so a batched matmul forms it there, unless the kernel is narrow
    (:data:`NARROW`)."""
    if fused or min(a.shape[-1], d.shape[-1]) <= NARROW:
        return tf.reduce_sum(a[:, :, :, None] * d[:, :, None, :], axis=1)
    return tf.matmul(a, d, transpose_a=True)


def episode_scores(spec: PolicySpec, traced: LayerDeltas, ep: EpisodeTensors,
                   fused: bool) -> list[tf.Tensor]:
    """``[E_b, *shape]`` per weight: ``g_e = sum_{t in e} grad log pi_t`` (module doc);
    ``fused``: the computation is XLA-compiled (:func:`chunk_scores`)."""
    num_segments = tf.shape(ep.returns)[0]
    scores = []
    for a, d in _per_step_pieces(spec, traced, ep.mask):
        if a is None:
            chunk = tf.reduce_sum(d, axis=list(range(1, d.shape.rank - 1)))
        elif a.shape.rank == 4:  # the LSTM gate layer: its window's steps too
            chunk = tf.einsum("kcwi,kcwo->kio", a, d)
        else:
            chunk = chunk_scores(a, d, fused)
        scores.append(tf.math.unsorted_segment_sum(chunk, ep.chunk_episode, num_segments))
    return scores


def _row_sq_norms(x: tf.Tensor) -> tf.Tensor:
    """``[N]``: the squared norm of each row of ``x [N, *shape]``, as one matrix product of
    the squares with a column of ones, for ``grouped_terms.leading_sum``'s reason: XLA's CPU
    code for a sum over x's trailing elements is a reduce window, which took longer than the
    matrix kernel for ``optimal_scalar_episodic``'s ``[E, 64, 64]`` scores
    (docs/benchmarks.md section 6, thirty-sixth session). Two columns, of which one is kept,
    as there."""
    flat = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
    ones = tf.ones(tf.stack([tf.shape(flat)[1], 2]), x.dtype)
    return tf.matmul(tf.square(flat), ones)[:, 0]


def _split(x: tf.Tensor, spec: PolicySpec, lead: int) -> list[tf.Tensor]:
    """A flat ``[..., P]`` memory tensor as per-weight ``[..., *shape]`` tensors."""
    shapes = list(spec.weight_shapes().values())
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    parts = tf.split(x, sizes, axis=-1)
    lead_shape = tf.shape(x)[:lead]
    return [tf.reshape(p, tf.concat([lead_shape, tf.constant(s, tf.int32)], 0))
            for p, s in zip(parts, [list(s) for s in shapes])]


def _flat(parts: list[tf.Tensor], lead: int) -> tf.Tensor:
    """Per-weight ``[..., *shape]`` tensors side by side as ``[..., P]``."""
    return tf.concat([tf.reshape(p, tf.concat([tf.shape(p)[:lead], [-1]], 0)) for p in parts],
                     axis=-1)


def _plug_in(num, den, sum_r, count):
    return _ratio_or(num, den, _safe_div(sum_r, count))


def _auto_lambda(n: list[tf.Tensor], b: list[tf.Tensor], nbar_num: list[tf.Tensor],
                 r: tf.Tensor, mean: tf.Tensor, ep: EpisodeTensors,
                 count: tf.Tensor) -> tf.Tensor:
    """``[E_b]``: ``baseline_shrinkage='auto'``'s lambda^(-e), pooled over every element
    (``pgtwin_core/baselines/shrinkage.py``, the same formula in the same order). Per weight:
    ``n`` the episodes' ``||g_e||^2`` or ``g_eh^2``, ``b`` the leave-one-out ratios,
    ``nbar_num`` their denominators (memory included); ``r`` R_e, ``mean`` m^(-e) ``[E_b]``;
    ``count = M_count + E - 1``. Padded episodes (n = 0, R centred to 0) add nothing."""
    valid = tf.cast(tf.range(tf.shape(r)[0]) < tf.cast(ep.num_episodes, tf.int32), r.dtype)
    centre = tf.reduce_sum(r) / ep.num_episodes
    rc = (r - centre) * valid
    others = ep.num_episodes - 1.0
    noise, signal = [], []
    for n_k, b_k, nbar_k in zip(n, b, nbar_num):
        rank = n_k.shape.rank
        rce, mce, me = (_expand(x, rank) for x in (rc, mean - centre, mean))
        positive = nbar_k > 0
        a = tf.where(positive, count / tf.where(positive, nbar_k, tf.ones_like(nbar_k)),
                     tf.zeros_like(nbar_k))
        bc = b_k - centre
        zz = (a * a * _others(n_k * n_k * rce * rce) + a * a * bc * bc * _others(n_k * n_k)
              + _others(rce * rce) + mce * mce * others
              - 2.0 * a * a * bc * _others(n_k * n_k * rce) - 2.0 * a * _others(n_k * rce * rce)
              + 2.0 * a * (mce + bc) * _others(n_k * rce) - 2.0 * a * bc * mce * _others(n_k)
              - 2.0 * mce * _others(rce))
        v = tf.maximum(zz, tf.zeros_like(zz)) / ((others - 1.0) * count)
        nbar = nbar_k / count
        axes = list(range(1, rank))
        noise.append(tf.reduce_sum(nbar * v, axis=axes) if axes else nbar * v)
        d2 = (b_k - me) ** 2
        signal.append(tf.reduce_sum(nbar * d2, axis=axes) if axes else nbar * d2)
    noise, signal = tf.add_n(noise), tf.add_n(signal)
    full = noise >= signal
    lam = tf.where(full, tf.ones_like(noise), noise / tf.where(full, tf.ones_like(signal), signal))
    return tf.where(others >= 2.0, lam, tf.ones_like(lam))


def _lambdas(shrinkage, n, b, nbar_num, r, mean, ep, count) -> tf.Tensor | float | None:
    """The shrinkage of every episode (``[E_b]`` for ``auto``, a float, or None: off)."""
    if shrinkage == "auto":
        return _auto_lambda(n, b, nbar_num, r, mean, ep, count)
    return float(shrinkage) if shrinkage else None


def _shrunk(b: tf.Tensor, mean: tf.Tensor, lam) -> tf.Tensor:
    """``(1 - lam) b + lam mean`` (``mean`` and a tensor ``lam`` ``[E_b]``, expanded)."""
    if lam is None:
        return b
    rank = b.shape.rank
    mean = _expand(mean, rank)
    if isinstance(lam, float):
        return (1.0 - lam) * b + lam * mean
    lam = _expand(lam, rank)
    return (1.0 - lam) * b + lam * mean


def _scalar_episodic(spec, traced, ep, memory, shrinkage=None, fused=True):
    scores = episode_scores(spec, traced, ep, fused)
    n = tf.add_n([_row_sq_norms(g) for g in scores])
    r = ep.returns
    num_e, den_e = n * r, n
    others_count = memory.count + ep.num_episodes - 1.0
    fallback = _safe_div(memory.sum_r + _others(r), others_count)
    den = memory.den + _others(den_e)
    b = _ratio_or(memory.num + _others(num_e), den, fallback)
    b = _shrunk(b, fallback, _lambdas(shrinkage, [n], [b], [den], r, fallback, ep,
                                      others_count))
    s_num, s_den, s_r = tf.reduce_sum(num_e), tf.reduce_sum(den_e), tf.reduce_sum(r)
    count = memory.count + ep.num_episodes
    plug_in = _plug_in(s_num + memory.num, s_den + memory.den, s_r + memory.sum_r, count)
    sums = MemoryTensors(s_num, s_den, s_r, ep.num_episodes)
    ascent = [leading_sum(g, r - b) for g in scores]  # sum_e g_e (R_e - b_e)
    return r / ep.scale - b / ep.scale, ascent, plug_in, sums


def _per_param(spec, traced, ep, memory, shrinkage=None, fused=True):
    scores = episode_scores(spec, traced, ep, fused)
    r = ep.returns
    others_count = memory.count + ep.num_episodes - 1.0
    fallback = _safe_div(memory.sum_r + _others(r), others_count)
    m_num, m_den = _split(memory.num, spec, 0), _split(memory.den, spec, 0)
    ascent, plug, s_num, s_den = [], [], [], []
    count = memory.count + ep.num_episodes
    s_r = tf.reduce_sum(r)
    sqs, dens, bs = [], [], []
    for g, mn, md in zip(scores, m_num, m_den):
        rank = g.shape.rank
        sq = tf.square(g)
        num_e = sq * _expand(r, rank)
        dens.append(md + _others(sq))
        bs.append(_ratio_or(mn + _others(num_e), dens[-1], _expand(fallback, rank)))
        sqs.append(sq)
        s_num.append(tf.reduce_sum(num_e, axis=0))
        s_den.append(tf.reduce_sum(sq, axis=0))
        plug.append(_plug_in(s_num[-1] + mn, s_den[-1] + md, s_r + memory.sum_r, count))
    lam = _lambdas(shrinkage, sqs, bs, dens, r, fallback, ep, others_count)
    for g, b in zip(scores, bs):
        b = _shrunk(b, fallback, lam)
        ascent.append(tf.reduce_sum(g * (_expand(r, g.shape.rank) - b), axis=0))
    sums = MemoryTensors(_flat(s_num, 0), _flat(s_den, 0), s_r, ep.num_episodes)
    return None, ascent, _flat(plug, 0), sums


def _padded_memory(memory: MemoryTensors, horizon: tf.Tensor) -> MemoryTensors:
    """``optimal_time``'s memory as ``horizon`` rows: its first rows, continued (where it has
    fewer) with zeros for num and sum_r and with its last row for den; zeros throughout when
    it has no row.

    Written as slices, pads and a tiled row, not a gather of row indices: the memory usually
    has ``horizon`` rows already (``HeldMemory.widen``), and XLA, which compiles for the
    concrete shapes, then drops the empty pad and tile and reads the memory in place."""
    rows = tf.shape(memory.num)[0]
    extra = tf.maximum(horizon - rows, 0)

    def zeros_after(x):
        return tf.pad(x[:horizon], tf.stack([tf.stack([0, extra]), [0, 0]]))

    # The last row, or the zero row appended when there is none.
    zero = tf.zeros(tf.stack([1, tf.shape(memory.den)[1]]), memory.den.dtype)
    last = tf.concat([memory.den, zero], 0)[tf.maximum(rows - 1, 0)]
    den = tf.concat([memory.den[:horizon], tf.tile(last[None], tf.stack([extra, 1]))], 0)
    return MemoryTensors(num=zeros_after(memory.num), den=den,
                         sum_r=zeros_after(memory.sum_r), count=memory.count,
                         horizon=memory.horizon)


def _step_score(a: tf.Tensor | None, d: tf.Tensor) -> tf.Tensor:
    """``[E, *shape]``: one step's score of every episode from its slices ``a [E, (W,) in]``
    and ``d [E, (W,) out]`` (a bias: d summed over the LSTM window's steps). An MLP kernel's
    outer product is a broadcast product, which XLA fuses into the loop that adds it to psi
    (an einsum ``ei,eo->eio`` is a dot of contraction size 1, emitted on its own)."""
    if a is None:
        return tf.reduce_sum(d, axis=list(range(1, d.shape.rank - 1)))
    if a.shape.rank == 3:
        return tf.einsum("ewi,ewo->eio", a, d)
    return a[:, :, None] * d[:, None, :]


def _time(spec, traced, ep, memory):
    """``optimal_time`` by one pass along the grid's time axis: at step l, ``psi_l = psi_{l-1}
    + g_l`` for every episode ``[E, P]`` (the numpy reference's order of additions), the
    step's two sums over the episodes (``sum_e psi^2 a_l`` and ``sum_e psi^2``, summed per
    group of ``GROUP`` episodes and then over the groups: ``grouped_sums``), and the
    ascent's terms with their leave-one-out ratios, added up per group of ``GROUP`` episodes
    with one division a group (``grouped_terms``; E padded with zero episodes to a multiple
    of GROUP) into a carry ``[E / GROUP, P]``, summed over the groups once after the loop (a
    sum over the episodes at every step would be one more pass a step). Each weight is its
    own chain of kernels a step, a large kernel several, one per block of its input rows
    (``row_blocks``), so that XLA runs the chains side by side. Nothing of size ``[E, H, P]``
    is formed (``tf.cumsum`` would, and XLA runs it as a reduce window of H terms per
    element); the plug-in baselines are formed after the loop from the stacked sums
    ``[H, P]``. Step l's slices (the grid's column l, a block's rows of it, the memory's row
    l) are taken inside the loop, where XLA reads them in place; transposing or splitting
    those tensors before the loop would copy them whole."""
    weights = [(None if a is None else pad_episodes(a), pad_episodes(d))
               for a, d in _per_step_pieces(spec, traced, ep.mask)]
    carries = blocks([tuple(s) for s in spec.weight_shapes().values()],
                     [a is not None for a, _ in weights])
    pieces = [weights[c.weight] for c in carries]  # per carry: its weight's (a, d)
    horizon = tf.shape(ep.mask)[1]
    memory = _padded_memory(memory, horizon)
    ar = pad_episodes(ep.discounted_rewards)  # [E, H], E a multiple of GROUP
    count = memory.count + ep.num_episodes
    s_r = tf.reduce_sum(ar, axis=0)[:, None]  # [H, 1]
    total_r = s_r + memory.sum_r

    def body(l, psis, ascents, arrays):
        ar_l = ar[:, l]
        fallback = _safe_div(total_r[l, 0] - ar_l, count - 1.0)  # [E]
        m_num, m_den = _split(memory.num[l], spec, 0), _split(memory.den[l], spec, 0)
        out = ([], [], [])
        for c, (a, d), psi, asc, ta in zip(carries, pieces, psis, ascents, arrays):
            a_l = None if a is None else rows_of(c, a[:, l], a.shape.rank - 2)
            psi = psi + _step_score(a_l, d[:, l])
            sq = tf.square(psi)
            sums = grouped_sums(psi, ar_l)  # [2, *shape]: num; den
            terms = grouped_ascent_terms(psi, sq, ar_l, sums[0] + rows_of(c, m_num[c.weight], 0),
                                         sums[1] + rows_of(c, m_den[c.weight], 0), fallback)
            for acc, x in zip(out, (psi, asc + terms, ta.write(l, sums))):
                acc.append(x)
        return (l + 1, *out)

    num_episodes = tf.shape(ar)[0]
    zeros = [[tf.zeros(tf.concat([[n], c.shape], 0), ar.dtype) for c in carries]
             for n in (num_episodes, num_episodes // GROUP)]
    arrays = [tf.TensorArray(ar.dtype, size=horizon, element_shape=tf.TensorShape([2, *c.shape]))
              for c in carries]
    loop = tf.while_loop(lambda l, *_: l < horizon, body, (tf.constant(0), *zeros, arrays))
    ascent = joined([leading_sum(per_group) for per_group in loop[2]], carries, 0)
    stacked = [ta.stack() for ta in loop[3]]  # per carry [H, 2, *shape]
    s_num, s_den = (_flat(joined([x[:, k] for x in stacked], carries, 1), 1)
                    for k in (0, 1))  # [H, P]
    plug = _plug_in(s_num + memory.num, s_den + memory.den, total_r, count)
    used = tf.maximum(ep.horizon, memory.horizon)
    rows = tf.cast(tf.range(horizon) < used, plug.dtype)
    logged = tf.reduce_sum(plug * rows[:, None]) / (tf.cast(used, plug.dtype)
                                                    * tf.cast(tf.shape(plug)[1], plug.dtype))
    sums = MemoryTensors(s_num, s_den, s_r, ep.num_episodes)
    return None, ascent, logged, sums, memory


def episodic_estimate(spec: PolicySpec, baseline: str, traced: LayerDeltas,
                      entropies: tf.Tensor, ep: EpisodeTensors, memory: MemoryTensors,
                      decay: float, entropy_coef: float, shrinkage=None,
                      fused: bool = True) -> EpisodicResult:
    """One update's estimate with an episodic optimal baseline, over the grid's cells.

    Args:
      baseline: ``optimal_scalar_episodic``, ``optimal_per_param`` or ``optimal_time``.
      traced: the forward pass and the deltas on the grid's ``K * C`` cells.
      entropies: ``[K * C]`` H_i on the cells (gradient flows: the reported loss carries it).
      ep, memory: the batch's grid and the earlier batches' sums (module doc).
      decay: rho of the memory (``ReinforceConfig.baseline_memory``).
      entropy_coef: the loss's; the bonus's gradient is the twin's to add.
      shrinkage: ``ReinforceConfig.baseline_shrinkage`` (the scalar and per-element ones).
      fused: the computation is XLA-compiled (``ReinforceConfig.jit_compile``), which
        chooses how the chunks' scores are formed (:func:`chunk_scores`).
    """
    weights = tf.reshape(ep.mask, [-1]) / ep.num_steps
    if baseline == "optimal_time":
        advantages, ascent, logged, sums, memory = _time(spec, traced, ep, memory)
    else:
        fit = _scalar_episodic if baseline == "optimal_scalar_episodic" else _per_param
        advantages, ascent, logged, sums = fit(spec, traced, ep, memory, shrinkage, fused)
        logged = tf.reduce_mean(logged)
    centre = tf.reduce_sum(ep.returns / ep.scale) / ep.num_episodes
    if advantages is None:  # the per-element ones: the surrogate at R_e - <R>
        advantages = ep.returns / ep.scale - centre
    cell_advantages = tf.reshape(tf.gather(advantages, ep.chunk_episode)[:, None]
                                 * tf.ones_like(ep.mask), [-1])
    loss = reinforce_loss(traced.log_probs, cell_advantages, weights, entropies, entropy_coef)
    grads = [-g / (ep.num_steps * ep.scale) for g in ascent]
    finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(x))
                                     for x in (sums.num, sums.den, sums.sum_r)]))
    new = MemoryTensors(num=decay * (memory.num + sums.num), den=decay * (memory.den + sums.den),
                        sum_r=decay * (memory.sum_r + sums.sum_r),
                        count=decay * (memory.count + sums.count),
                        horizon=None if memory.horizon is None
                        else tf.maximum(memory.horizon, ep.horizon))
    return EpisodicResult(loss=loss, grads=grads, entropy=tf.reduce_sum(weights * entropies),
                          baseline=logged / ep.scale, memory=new, sums_finite=finite)


def estimate_from_args(spec: PolicySpec, config, traced: LayerDeltas, entropies: tf.Tensor,
                       grid: tuple, memory: tuple) -> EpisodicResult:
    """:func:`episodic_estimate` on a twin's flat arguments: ``grid`` the layout's after obs
    and actions (``pgtwin_core.baselines.layout_path.layout_args``: mask, chunk_episode,
    returns, discounted_rewards, E, sum_e T_e, scale, horizon), ``memory`` the memory's
    tensors (:data:`MEMORY_FIELDS`, then ``horizon`` for ``optimal_time``)."""
    ep = EpisodeTensors(*grid)
    held = MemoryTensors(*memory[:4], horizon=memory[4] if len(memory) > 4 else None)
    return episodic_estimate(spec, config.baseline, traced, entropies, ep, held,
                             config.baseline_memory, config.entropy_coef,
                             config.baseline_shrinkage, config.jit_compile)


def memory_list(memory: MemoryTensors) -> list[tf.Tensor]:
    """:class:`MemoryTensors` as the flat list :func:`estimate_from_args` takes."""
    out = [memory.num, memory.den, memory.sum_r, memory.count]
    return out if memory.horizon is None else [*out, memory.horizon]


def memory_from_list(values) -> MemoryTensors:
    """:func:`memory_list`'s inverse."""
    values = list(values)
    return MemoryTensors(*values[:4], horizon=values[4] if len(values) > 4 else None)
