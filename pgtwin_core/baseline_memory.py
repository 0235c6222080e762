"""Episodic baselines fitted on earlier batches too: decayed sums carried from update to update.

The episodic optimal baselines (``pgtwin_core.baselines``) are ratios of sums over episodes,
``b = sum_e num_e / sum_e den_e``, each episode's taken over the OTHER episodes of its batch
(leave-one-out) to stay exactly unbiased. With 8 episodes a batch, a ratio per parameter
element from 7 episodes is noisy enough to make the estimate noisier than the mean
baseline's (docs/baselines.md). As Duan et al. (2016) and modular_rl fit their baselines on
earlier batches, the sums here also take in the batches before this one::

    M_k = sum_{j < k} rho^(k - j) S_j          (M <- rho (M + S_k) after update k)
    b^(-e) = (M.num + sum_{e' != e} num_e') / (M.den + sum_{e' != e} den_e')

``S_j`` are batch j's full sums, ``rho = ReinforceConfig.baseline_memory`` in [0, 1): the
current batch counts once, the one before rho, the one before that rho^2 (about
``1 / (1 - rho)`` batches in all); ``rho = 0`` keeps nothing (batch-only). Earlier batches
are independent of the current batch's episodes given the past, so ``E[g_e b^(-e)] = 0`` and
the estimate stays exactly unbiased; what it pays is staleness: while the policy moves,
old batches describe an older policy (a worse baseline, never a biased estimate).

Sums (float64, in units of the raw, unnormalised returns, so that batches normalised by
different scales add up; a twin divides the baseline by the current batch's scale)::

    optimal_scalar_episodic  num = sum n_e R_e, den = sum n_e (n_e = ||g_e||^2)   []
    optimal_per_param        num = sum g_e^2 R_e, den = sum g_e^2                  [P]
    optimal_time             num = sum psi_l^2 a_l r_l, den = sum psi_l^2         [H, P]
    all                      sum_r = sum R_e ([] ; time: sum a_l r_l [H, 1]), count = E

``sum_r / count`` is the mean-baseline fallback where a denominator is 0. ``optimal_time``'s
horizon H is the longest episode seen: episodes are continued past their end with r = 0 and
psi frozen (``pgtwin_core.baselines``), so a memory shorter than a new batch is padded with
zero rows of ``num`` and ``sum_r`` and with its last row of ``den`` (where every episode it
holds is at its final psi); a batch shorter than the memory is padded to the memory's H.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIELDS = ("num", "den", "sum_r", "count")


@dataclass(frozen=True)
class EpisodeSums:
    """Sums over a set of complete episodes (module doc): float64 arrays, raw return units."""

    num: np.ndarray
    """``[]``, ``[P]`` or ``[H, P]``: numerator of the baseline ratio."""
    den: np.ndarray
    """Same shape as ``num``: denominator (>= 0)."""
    sum_r: np.ndarray
    """``[]`` (sum of R_e) or ``[H, 1]`` (sum of a_l r_l, optimal_time)."""
    count: float
    """Episodes summed (a decayed count in a memory)."""

    @property
    def horizon(self) -> int:
        """H of time-indexed sums (``num`` of rank 2), else 0."""
        return int(self.num.shape[0]) if np.ndim(self.num) == 2 else 0

    def padded(self, horizon: int) -> "EpisodeSums":
        """Time-indexed sums continued to ``horizon`` rows (module doc); others unchanged."""
        extra = horizon - self.horizon
        if self.horizon == 0 or extra <= 0:
            return self
        zeros = lambda x: np.concatenate([x, np.zeros((extra, *x.shape[1:]))])  # noqa: E731
        return EpisodeSums(num=zeros(self.num), sum_r=zeros(self.sum_r), count=self.count,
                           den=np.concatenate([self.den, np.repeat(self.den[-1:], extra, axis=0)]))

    def plus(self, other: "EpisodeSums") -> "EpisodeSums":
        """Elementwise sum, time-indexed sums first padded to the longer horizon.
        ``ValueError`` if the shapes then differ (sums of another policy or baseline)."""
        horizon = max(self.horizon, other.horizon)
        a, b = self.padded(horizon), other.padded(horizon)
        shapes = [(np.shape(x.num), np.shape(x.sum_r)) for x in (a, b)]
        if shapes[0] != shapes[1]:
            raise ValueError(f"episode sums of shapes (num, sum_r) {shapes[0]} and {shapes[1]} "
                             "cannot be added: a baseline memory of another policy or baseline?")
        return EpisodeSums(num=a.num + b.num, den=a.den + b.den, sum_r=a.sum_r + b.sum_r,
                           count=a.count + b.count)

    def scaled(self, factor: float) -> "EpisodeSums":
        """Every sum (and the count) times ``factor``."""
        return EpisodeSums(num=factor * self.num, den=factor * self.den,
                           sum_r=factor * self.sum_r, count=factor * self.count)

    def is_finite(self) -> bool:
        """No NaN or infinity in any sum."""
        return all(bool(np.all(np.isfinite(getattr(self, f)))) for f in FIELDS)


def check_decay(decay: object, where: str = "baseline_memory") -> float:
    """``decay`` as a float in [0, 1); ``ValueError`` naming it and ``where`` otherwise."""
    ok = (isinstance(decay, (int, float, np.floating, np.integer)) and not isinstance(decay, bool)
          and 0.0 <= float(decay) < 1.0)
    if not ok:
        raise ValueError(f"{where}={decay!r} must be a number in [0, 1) (the decay of the "
                         "earlier batches' sums; 0 keeps none)")
    return float(decay)


class BaselineMemory:
    """The decayed sums of earlier batches, ``M`` (module doc), for one agent's baseline.

    Both twins and the distributed agent hold one and call :meth:`add` after an update that
    was applied, with that batch's full sums (all-reduced under a strategy).

    Args:
      decay: rho in [0, 1); 0 keeps nothing (the batch-only baselines).
    """

    def __init__(self, decay: float):
        self.decay = check_decay(decay)
        self._sums: EpisodeSums | None = None

    @property
    def sums(self) -> EpisodeSums | None:
        """``M``, or None while empty (nothing added yet, or ``decay`` 0)."""
        return self._sums

    @property
    def horizon(self) -> int:
        """H of the time-indexed sums held (0 if none): a batch's sums are taken at least
        this long."""
        return 0 if self._sums is None else self._sums.horizon

    def add(self, batch: EpisodeSums) -> bool:
        """``M <- decay * (M + batch)``; returns False, leaving ``M`` as it was, when any sum
        is non-finite (a NaN never enters the memory)."""
        if not batch.is_finite():
            return False
        if self.decay == 0.0:
            return True
        total = batch if self._sums is None else self._sums.plus(batch)
        self._sums = total.scaled(self.decay)
        return True

    # ------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, np.ndarray]:
        """``{field: float64 array}`` (empty while empty): what a checkpoint saves."""
        if self._sums is None:
            return {}
        return {f: np.array(getattr(self._sums, f), np.float64) for f in FIELDS}

    def load_state(self, state: dict[str, np.ndarray], where: str = "baseline memory") -> None:
        """Put back :meth:`state`'s output; ``ValueError`` naming ``where`` if malformed."""
        if not state:
            self._sums = None
            return
        missing = [f for f in FIELDS if f not in state]
        if missing:
            raise ValueError(f"{where}: missing {missing} (has {sorted(state)})")
        arrays = {f: np.array(state[f], np.float64) for f in FIELDS}
        if arrays["num"].shape != arrays["den"].shape or arrays["count"].shape != ():
            raise ValueError(f"{where}: num {arrays['num'].shape}, den {arrays['den'].shape} "
                             f"and count {arrays['count'].shape} do not fit together")
        sums = EpisodeSums(**{**arrays, "count": float(arrays["count"])})
        if not sums.is_finite():
            raise ValueError(f"{where}: holds non-finite sums")
        self._sums = sums


MEMORY_KINDS = {"optimal_scalar_episodic": "scalar", "optimal_per_param": "vector",
                "optimal_time": "time"}
"""The shape of each episodic baseline's sums: ``[]``, ``[P]`` or ``[H, P]`` (module doc)."""


class HeldMemory:
    """:class:`BaselineMemory`'s reading side over sums a twin holds as its own variables.

    The TensorFlow episodic path (``pgtwin/mode_agnostic/episodic_baselines.py``) keeps the
    memory in the agent's variables, saved in the agent's checkpoint and updated inside the
    update's own computation; this object reads and writes them for checkpoints of old runs
    (``baseline_memory.npz``), the parity tests and ``pgtwin train``. Empty (zeros, count 0)
    is the same as no memory: every use adds the sums. ``optimal_time`` stores its sums
    padded to the last update's grid (rows past ``horizon`` hold the padding); :meth:`state`
    gives the ``horizon`` rows a :class:`BaselineMemory` would hold.

    Args:
      decay: rho in [0, 1).
      baseline: an episodic baseline (``MEMORY_KINDS``).
      width: P, the weights' elements.
      read: ``() -> {num, den, sum_r, count[, horizon]}``, the variables' numpy values.
      write: ``({num, den, sum_r, count[, horizon]}) -> None``, assigns them.
      read_rows: ``() -> (rows of num, horizon)`` for ``optimal_time``, read without the
        sums (``read`` copies the ``[H, P]`` sums out of TensorFlow). None: taken from
        ``read``.

    ``optimal_time``'s ``(rows, horizon)`` are kept as a record (:meth:`held_rows`): every
    update lays its grid out for them, and reading them back costs a TensorFlow call after
    each update (an eager one costs about as much as the layout's numpy). The record is
    what this object last wrote or read, or what the update's computation reported it left
    (:meth:`remember_rows`). Anything else may write the variables (a checkpoint restore, a
    user's assign), so the record is a claim, not a fact: the update's computation compares
    it with the variables and applies nothing where they differ
    (``pgtwin/mode_agnostic/episodic_baselines.rows_held``), and the path then forgets it
    (:meth:`forget_rows`) and updates again from a fresh read
    (``pgtwin_core.baselines.layout_path.LayoutPath.update``).
    """

    in_agent_checkpoint = True
    """Saved with the agent's own checkpoint (no ``baseline_memory.npz`` needed)."""

    def __init__(self, decay: float, baseline: str, width: int, read, write, read_rows=None):
        self.decay = check_decay(decay)
        self.kind, self.width = MEMORY_KINDS[baseline], int(width)
        self._read, self._write_variables, self._read_rows = read, write, read_rows
        self._rows: tuple[int, int] | None = None

    def _values(self) -> dict[str, np.ndarray]:
        values = {k: np.array(v, np.float64) for k, v in self._read().items()}
        if self.kind == "time":
            rows = int(values.pop("horizon"))
            values.update(num=values["num"][:rows], den=values["den"][:rows],
                          sum_r=values["sum_r"][:rows])
        return values

    @property
    def sums(self) -> EpisodeSums | None:
        """``M`` as float64 sums, or None while empty."""
        values = self._values()
        if float(values["count"]) == 0.0:
            return None
        return EpisodeSums(num=values["num"], den=values["den"], sum_r=values["sum_r"],
                           count=float(values["count"]))

    @property
    def horizon(self) -> int:
        """H of the time-indexed sums held (0 if none), read from the variables (the record
        serves the update, which checks it)."""
        self.forget_rows()
        return self.held_rows()[1]

    def held_rows(self) -> tuple[int, int]:
        """``(rows stored, horizon)`` of ``optimal_time``'s sums: the record (class doc),
        read from the variables where there is none; ``(0, 0)`` for the other kinds. Rows
        past ``horizon`` are padding (:meth:`widen`)."""
        if self.kind != "time":
            return 0, 0
        if self._rows is None:
            if self._read_rows is not None:
                rows, horizon = self._read_rows()
            else:
                values = self._read()
                rows, horizon = np.shape(values["num"])[0], values["horizon"]
            self._rows = int(rows), int(horizon)
        return self._rows

    def remember_rows(self, rows: int, horizon: int) -> None:
        """Record ``(rows, horizon)`` as what the variables hold: what an update's computation
        reported it left them with."""
        if self.kind == "time":
            self._rows = int(rows), int(horizon)

    def forget_rows(self) -> None:
        """Drop the record: the next :meth:`held_rows` reads the variables."""
        self._rows = None

    def _write(self, values: dict[str, np.ndarray]) -> None:
        self._write_variables(values)
        self._rows = None

    def widen(self, rows: int) -> None:
        """``optimal_time``: the stored sums continued to ``rows`` rows, as the update's
        computation continues them on every use (``num`` and ``sum_r`` with zeros, ``den``
        with its last row; zeros when it has none), so the values it sees are the same.

        Why: XLA compiles the update once per input shape, and the memory's rows are one of
        them. Stored at the grid's width, the memory adds no shape of its own: one compile per
        grid width, where (grid, memory) pairs cost two (an empty memory's first update, then
        the same grid with the memory it wrote). A no-op at ``rows`` rows or more, and for the
        other kinds.
        """
        if self.kind != "time":
            return
        values = self._read()
        have = int(np.shape(values["num"])[0])
        if have >= rows:
            return
        extra = rows - have
        zeros = lambda x: np.zeros((extra, *np.shape(x)[1:]), np.asarray(x).dtype)  # noqa: E731
        den = values["den"]
        tail = np.repeat(den[-1:], extra, axis=0) if have else zeros(den)
        self._write({**values, "num": np.concatenate([values["num"], zeros(values["num"])]),
                     "den": np.concatenate([den, tail]),
                     "sum_r": np.concatenate([values["sum_r"], zeros(values["sum_r"])])})
        self.remember_rows(rows, int(values["horizon"]))

    def state(self) -> dict[str, np.ndarray]:
        """``BaselineMemory.state``'s arrays (empty while empty)."""
        sums = self.sums
        if sums is None:
            return {}
        return {f: np.array(getattr(sums, f), np.float64) for f in FIELDS}

    def load_state(self, state: dict[str, np.ndarray], where: str = "baseline memory") -> None:
        """Put back a :meth:`state` (or an old run's ``baseline_memory.npz``); ``ValueError``
        naming ``where`` if malformed or shaped for another baseline or policy."""
        check = BaselineMemory(self.decay)
        check.load_state(state, where)
        if check.sums is None:
            self._write(self.empty())
            return
        sums, width = check.sums, self.width
        want = {"scalar": ((), ()), "vector": ((width,), ())}.get(
            self.kind, ((sums.horizon, width), (sums.horizon, 1)))
        got = (np.shape(sums.num), np.shape(sums.sum_r))
        if got != want or (self.kind == "time" and sums.horizon == 0):
            raise ValueError(f"{where}: sums of shapes (num, sum_r) {got} do not fit this "
                             f"agent's baseline ({self.kind}: {want}, P = {width}): a memory "
                             "of another policy or baseline?")
        values = {f: np.asarray(getattr(sums, f), np.float64) for f in FIELDS}
        if self.kind == "time":
            values["horizon"] = np.int32(sums.horizon)
        self._write(values)

    def empty(self) -> dict[str, np.ndarray]:
        """The variables' values of an empty memory."""
        shape = {"scalar": (), "vector": (self.width,), "time": (0, self.width)}[self.kind]
        values = {"num": np.zeros(shape), "den": np.zeros(shape),
                  "sum_r": np.zeros((0, 1)) if self.kind == "time" else np.zeros(()),
                  "count": np.zeros(())}
        if self.kind == "time":
            values["horizon"] = np.int32(0)
        return values
