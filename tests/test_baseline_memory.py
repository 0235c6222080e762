"""Episodic baselines with a memory of earlier batches (``pgtwin_core/baseline_memory.py``).

The oracle keeps every earlier episode itself (its score, psi and return) with the weight
``rho^(k - j)`` of its batch j at batch k, and computes each episode's leave-one-out ratio
with explicit loops; it shares no code with the decayed sums, the padding or the
leave-one-out helpers it checks. Per-step gradients are random arrays fed through
``episodic_estimate`` (the batch's obs carry each step's flat index, so the fake
per-sample-gradient function can look its rows up).
"""
from __future__ import annotations

import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from pgtwin_core import baselines as bl
from pgtwin_core.baseline_memory import BaselineMemory, EpisodeSums, HeldMemory
from pgtwin_core.baselines.layout_path import LayoutPath
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec
from pgtwin.twins import agent_class

from tests.per_sample_cases import KINDS, episodic_batch, random_weights

EPISODIC = ("optimal_scalar_episodic", "optimal_per_param", "optimal_time")
WIDTH = 5


# ---------------------------------------------------------------------------- oracle
def episodes_of(case, grads: np.ndarray, gamma: float) -> list[dict]:
    """Each complete episode's per-step gradients ``[T_e, P]`` and discounted rewards."""
    rewards = case.batch.rewards.reshape(-1)
    out = []
    for rows in case.episodes:
        ar = np.array([gamma ** l * rewards[i] for l, i in enumerate(rows)])
        out.append({"g": grads[rows], "ar": ar, "R": ar.sum()})
    return out


def oracle_ascent(baseline: str, current: list[dict], earlier: list[tuple[float, dict]]) -> np.ndarray:
    """``sum_e (...) / sum_e T_e`` with each episode's baseline over the other episodes of
    its batch (weight 1) and the ``earlier`` ones (their weights)."""
    horizon = max(len(e["ar"]) for e in current + [e for _, e in earlier])
    width = current[0]["g"].shape[1]

    def padded(e):  # psi frozen and r = 0 after the episode's end
        n = len(e["ar"])
        psi = np.cumsum(np.concatenate([e["g"], np.zeros((horizon - n, width))]), axis=0)
        return psi, np.concatenate([e["ar"], np.zeros(horizon - n)])

    def ratio(num, den, fallback):
        return num / den if den != 0 else fallback

    total = np.zeros(width)
    for k, e in enumerate(current):
        others = earlier + [(1.0, o) for j, o in enumerate(current) if j != k]
        weight = sum(w for w, _ in others)
        g_e = e["g"].sum(0)
        if baseline == "optimal_scalar_episodic":
            sq = [np.sum(o["g"].sum(0) ** 2) for _, o in others]
            mean = sum(w * o["R"] for w, o in others) / weight if weight > 0 else 0.0
            b = ratio(sum(w * n * o["R"] for (w, o), n in zip(others, sq)),
                      sum(w * n for (w, _), n in zip(others, sq)), mean)
            total += g_e * (e["R"] - b)
        elif baseline == "optimal_per_param":
            for h in range(width):
                gh = [o["g"].sum(0)[h] ** 2 for _, o in others]
                mean = sum(w * o["R"] for w, o in others) / weight if weight > 0 else 0.0
                b = ratio(sum(w * q * o["R"] for (w, o), q in zip(others, gh)),
                          sum(w * q for (w, _), q in zip(others, gh)), mean)
                total[h] += g_e[h] * (e["R"] - b)
        else:  # per time l, every parameter h at once: b[h] = num[h] / den[h], else the mean
            psi_e, r_e = padded(e)
            terms = [(w, *padded(o)) for w, o in others]
            for l in range(horizon):
                mean = sum(w * r[l] for w, _, r in terms) / weight if weight > 0 else 0.0
                num = sum(w * p[l] ** 2 * r[l] for w, p, r in terms)
                den = sum(w * p[l] ** 2 for w, p, _ in terms)
                b = np.where(den != 0, num / np.where(den != 0, den, 1.0), mean)
                total += psi_e[l] * (r_e[l] - b)
    return total / sum(len(e["ar"]) for e in current)


# ---------------------------------------------------------------------------- through episodic_estimate
SPEC = PolicySpec("categorical", (4,), 3, hidden=(8,))


def indexed(case) -> Batch:
    """The case's batch with obs[..., 0] = the step's flat index (t * N + n)."""
    t, n = case.batch.rewards.shape
    obs = np.zeros((t, n, 4))
    obs[..., 0] = np.arange(t * n).reshape(t, n)
    return dataclasses.replace(case.batch, obs=obs)


def library_ascent(baseline: str, batch: Batch, grads: np.ndarray, config, memory) -> tuple:
    """``episodic_estimate``'s ascent ``[P]`` with ``memory`` (then updated), and the estimate."""
    lookup = lambda obs, actions: {"w": grads[obs[:, 0].astype(int)]}  # noqa: E731
    est = bl.episodic_estimate(batch, config.replace(baseline=baseline), SPEC, lookup, memory)
    assert memory.add(est.sums)
    if est.ascent is not None:
        return est.ascent["w"], est
    # optimal_scalar_episodic trains on advantages R_e - b_e with weights 1 / sum T_e.
    return np.sum((est.inputs.weights * est.inputs.advantages)[:, None] * grads, axis=0), est


def batches_and_grads(num: int, seed: int):
    """``num`` batches of different episode layouts and random per-step gradients; column 2
    is 0 everywhere (every denominator 0) and column 4 only in the second batch."""
    out = []
    for k in range(num):
        case = episodic_batch(SPEC, num_steps=14 + 3 * k, num_envs=2, seed=seed + k)
        rng = np.random.default_rng(100 * seed + k)
        grads = rng.standard_normal((case.batch.rewards.size, WIDTH))
        grads[:, 2] = 0.0
        if k == 1:
            grads[:, 4] = 0.0
        out.append((case, grads))
    return out


@pytest.mark.parametrize("rho", (0.0, 0.6))
@pytest.mark.parametrize("baseline", EPISODIC)
def test_three_batches_match_the_oracle(baseline, rho):
    config = ReinforceConfig(gamma=0.9, normalize_returns=False, baseline_memory=rho,
                             dtype="float64")
    memory = BaselineMemory(rho)
    earlier: list[tuple[float, dict]] = []
    for k, (case, grads) in enumerate(batches_and_grads(3, seed=11)):
        assert len(case.episodes) >= 2, "a case with a single episode tests too little"
        got, est = library_ascent(baseline, indexed(case), grads, config, memory)
        current = episodes_of(case, grads, config.gamma)
        want = oracle_ascent(baseline, current, earlier)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"batch {k}")
        assert np.isfinite(est.baseline) and got[2] == 0.0
        earlier = [(rho * w, e) for w, e in earlier] + [(rho, e) for e in current]
    if rho == 0.0:
        assert memory.sums is None and memory.state() == {}
    else:  # the third batch's count: 0.6 E_2 + 0.36 E_1 + 0.216 E_0 ... after adding it
        counts = [len(c.episodes) for c, _ in batches_and_grads(3, seed=11)]
        assert memory.sums.count == pytest.approx(0.6 * counts[2] + 0.36 * counts[1]
                                                  + 0.216 * counts[0])


def test_memory_changes_the_estimate_and_batch_only_ignores_it():
    """rho > 0 must move the second batch's estimate (else the oracle test above could pass
    with the memory ignored); rho = 0 gives the batch-only estimate of PR history."""
    (case0, g0), (case1, g1) = batches_and_grads(2, seed=3)
    config = ReinforceConfig(gamma=0.9, normalize_returns=False, dtype="float64")
    for baseline in EPISODIC:
        fresh, _ = library_ascent(baseline, indexed(case1), g1, config, BaselineMemory(0.0))
        for rho, same in ((0.0, True), (0.6, False)):
            memory = BaselineMemory(rho)
            library_ascent(baseline, indexed(case0), g0, config, memory)
            second, _ = library_ascent(baseline, indexed(case1), g1, config, memory)
            assert np.array_equal(second, fresh) == same, (baseline, rho)


@pytest.mark.parametrize("baseline", EPISODIC)
def test_normalized_returns_divide_the_estimate_with_memory_too(baseline):
    """The memory holds raw-return sums, so with it the normalised estimate is still the raw
    one divided by the current batch's std of reward-to-go."""
    from pgtwin_core.returns import discounted_returns

    (case0, g0), (case1, g1) = batches_and_grads(2, seed=5)
    got = {}
    for normalize in (True, False):
        config = ReinforceConfig(gamma=0.9, normalize_returns=normalize, baseline_memory=0.8,
                                 dtype="float64")
        memory = BaselineMemory(0.8)
        library_ascent(baseline, indexed(case0), g0, config, memory)
        got[normalize] = library_ascent(baseline, indexed(case1), g1, config, memory)[0]
    b = case1.batch
    scale = np.std(discounted_returns(b.rewards, b.terminated, b.truncated, 0.9)[b.valid])
    np.testing.assert_allclose(got[True] * scale, got[False], rtol=1e-10, atol=1e-13)


# ---------------------------------------------------------------------------- the memory itself
def test_decay_padding_and_fallback_by_hand():
    memory = BaselineMemory(0.5)
    # Time sums of H = 1, then H = 2: the first is padded with num 0, sum_r 0 and its den row.
    first = EpisodeSums(num=np.array([[2.0]]), den=np.array([[4.0]]), sum_r=np.array([[6.0]]),
                        count=2.0)
    second = EpisodeSums(num=np.array([[1.0], [3.0]]), den=np.array([[1.0], [1.0]]),
                         sum_r=np.array([[1.0], [1.0]]), count=1.0)
    assert memory.add(first) and memory.horizon == 1
    assert memory.add(second) and memory.horizon == 2
    # M = 0.5 (0.5 first + second):  num (0.5*2 + 1, 0 + 3) / 2 = (1, 1.5);
    # den (0.5*4 + 1, 0.5*4 + 1) / 2 = (1.5, 1.5); sum_r (0.5*6 + 1, 0 + 1) / 2 = (2, 0.5);
    # count (0.5*2 + 1) / 2 = 1.
    state = memory.state()
    np.testing.assert_array_equal(state["num"][:, 0], [1.0, 1.5])
    np.testing.assert_array_equal(state["den"][:, 0], [1.5, 1.5])
    np.testing.assert_array_equal(state["sum_r"][:, 0], [2.0, 0.5])
    assert state["count"] == 1.0
    # Two episodes with no score at all (den 0 everywhere), memory M_R = 3, M_E = 0.5:
    # each one's b = (3 + the other's R) / (0.5 + 1): R = (1, 4) -> (7 / 1.5, 4 / 1.5).
    prior = EpisodeSums(num=np.zeros(2), den=np.zeros(2), sum_r=np.float64(3.0), count=0.5)
    ascent, b = bl.per_param_ascent(np.zeros((2, 2)), np.array([1.0, 4.0]), 3, prior)
    assert np.array_equal(ascent, np.zeros(2))
    np.testing.assert_allclose(b, [(3 + 5) / 2.5] * 2)  # plug-in over memory and both
    np.testing.assert_allclose(bl.loo_scalar_baselines([0.0, 0.0], [1.0, 4.0], EpisodeSums(
        num=np.float64(0), den=np.float64(0), sum_r=np.float64(3), count=0.5)), [7 / 1.5, 4 / 1.5])


def test_non_finite_sums_never_enter_and_bad_state_is_refused():
    memory = BaselineMemory(0.9)
    good = EpisodeSums(num=np.ones(3), den=np.ones(3), sum_r=np.float64(2.0), count=1.0)
    assert memory.add(good)
    before = memory.state()
    for bad in (np.nan, np.inf):
        assert not memory.add(dataclasses.replace(good, num=np.array([1.0, bad, 1.0])))
        assert not memory.add(dataclasses.replace(good, count=bad))
    after = memory.state()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match="baseline_memory=1.0 must be a number in \\[0, 1\\)"):
        BaselineMemory(1.0)
    with pytest.raises(ValueError, match="baseline_memory=-0.1 must be"):
        BaselineMemory(-0.1)
    with pytest.raises(ValueError, match="ReinforceConfig.baseline_memory=True must be"):
        ReinforceConfig(baseline_memory=True)
    with pytest.raises(ValueError, match="ckpt/x.npz: missing \\['count'\\]"):
        memory.load_state({"num": 1, "den": 1, "sum_r": 1}, where="ckpt/x.npz")
    with pytest.raises(ValueError, match="ckpt/x.npz: holds non-finite sums"):
        memory.load_state({**before, "num": np.full(3, np.nan)}, where="ckpt/x.npz")
    with pytest.raises(ValueError, match="cannot be added: a baseline memory of another"):
        bl.per_param_ascent(np.ones((2, 4)), np.ones(2), 2, memory.sums)


# ---------------------------------------------------------------------------- twins
@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_twins_remember_the_applied_batch_only(impl):
    """Second update's gradient = the oracle over both batches' loop gradients (the first at
    the weights it was taken at); a skipped non-finite update leaves the memory unchanged."""
    spec = KINDS["categorical_mlp"]
    cases = [episodic_batch(spec, 20, 3, seed=s) for s in (21, 22)]
    rho = 0.7
    for baseline in EPISODIC:
        # The eager twin under XLA, the graph twin without (XLA's compiles are most of the time).
        config = ReinforceConfig(dtype="float64", baseline=baseline, baseline_memory=rho,
                                 gamma=0.9, normalize_returns=False, optimizer="sgd",
                                 num_envs=3, num_steps=20, jit_compile=impl == "eager")
        agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=1))
        loops = []
        for k, case in enumerate(cases):
            inputs = agent.inputs(case.batch)
            loop = agent.per_sample_gradients(inputs.obs, inputs.actions, method="loop")
            flat = bl.flatten(loop)
            if k == 1:
                first = [(rho, e) for e in episodes_of(cases[0], loops[0], 0.9)]
                want = oracle_ascent(baseline, episodes_of(case, flat, 0.9), first)
                got = -bl.flatten({n: g[None] for n, g in agent.gradients(case.batch).items()})[0]
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13,
                                           err_msg=f"{impl} {baseline}")
            loops.append(flat)
            assert agent.update(case.batch)["applied"]
        state = agent.baseline_memory.state()
        weights = agent.get_weights()  # a head of 1e308: infinite logits, NaN scores
        agent.set_weights({**weights, "policy/head/kernel": weights["policy/head/kernel"] * 1e308})
        with np.errstate(all="ignore"):
            assert not agent.update(cases[1].batch)["applied"]
        assert all(np.array_equal(state[k], v) for k, v in agent.baseline_memory.state().items())
        agent.close()
    plain = agent_class(impl)(spec, ReinforceConfig(baseline="mean"))
    assert plain.baseline_memory is None
    plain.close()


# ------------------------------------------------- optimal_time's rows at the grid width
def test_widen_continues_the_sums_as_the_computation_does():
    """By hand: num and sum_r continue with zeros, den with its last row; an empty memory
    with zeros; the horizon and count stay; nothing happens at or above the rows held."""
    store = {}
    memory = held_memory(store)
    store.update(num=np.array([[1.0, 2.0], [3.0, 4.0]]), den=np.array([[5.0, 6.0], [7.0, 8.0]]),
                 sum_r=np.array([[9.0], [10.0]]), count=np.float64(2.5), horizon=np.int32(2))
    assert memory.held_rows() == (2, 2)
    memory.widen(4)
    np.testing.assert_array_equal(store["num"], [[1, 2], [3, 4], [0, 0], [0, 0]])
    np.testing.assert_array_equal(store["den"], [[5, 6], [7, 8], [7, 8], [7, 8]])
    np.testing.assert_array_equal(store["sum_r"], [[9], [10], [0], [0]])
    assert (store["count"], store["horizon"]) == (2.5, 2)
    assert memory.held_rows() == (4, 2)
    before = {k: np.copy(v) for k, v in store.items()}
    memory.widen(3)
    assert all(np.array_equal(before[k], store[k]) for k in before)
    store.clear()
    store.update(memory.empty())
    memory.widen(3)
    assert store["num"].shape == store["den"].shape == (3, 2) and store["sum_r"].shape == (3, 1)
    assert not np.any(store["num"]) and not np.any(store["den"]) and not np.any(store["sum_r"])
    assert memory.state() == {}


def test_the_record_of_the_rows_is_read_once_and_kept_until_a_write():
    """``held_rows`` reads the rows once and then answers from its record: what an update
    reported (``remember_rows``), what ``widen`` wrote; a write through the memory
    (``load_state``) or ``forget_rows`` makes the next call read again. The public
    ``horizon`` always reads."""
    store = {"num": np.zeros((3, 2)), "den": np.zeros((3, 2)), "sum_r": np.zeros((3, 1)),
             "count": np.float64(1.0), "horizon": np.int32(2)}
    reads = []

    def read_rows():
        reads.append(1)
        return store["num"].shape[0], int(store["horizon"])

    memory = HeldMemory(0.5, "optimal_time", 2, lambda: dict(store), store.update, read_rows)
    assert memory.held_rows() == (3, 2) and memory.held_rows() == (3, 2) and len(reads) == 1
    memory.remember_rows(8, 5)
    assert memory.held_rows() == (8, 5) and len(reads) == 1
    memory.forget_rows()
    assert memory.held_rows() == (3, 2) and len(reads) == 2
    memory.widen(6)  # reads the full values, not read_rows, and records what it wrote
    assert store["num"].shape[0] == 6 and memory.held_rows() == (6, 2) and len(reads) == 2
    memory.load_state({})
    assert memory.held_rows() == (0, 0) and len(reads) == 3
    memory.remember_rows(9, 7)  # a stale record: the public horizon reads the variables
    assert memory.horizon == 0 and len(reads) == 4
    other = HeldMemory(0.5, "optimal_per_param", 2, lambda: dict(store), store.update)
    other.remember_rows(4, 4)
    assert other.held_rows() == (0, 0)


def test_an_update_whose_record_is_stale_twice_applies_nothing_and_says_why():
    """The path redoes an update once after a stale record (the memory written behind its
    back); a second mismatch means something writes the memory meanwhile: an error."""
    spec = KINDS["categorical_mlp"]
    config = ReinforceConfig(baseline="optimal_time", baseline_memory=0.5, num_envs=3,
                             num_steps=20)
    # 16 rows: wider than this batch's grid, so the path does not widen (which reads the sums)
    store = HeldMemory(0.5, "optimal_time", 2, lambda: {}, lambda values: None,
                       lambda: (16, 3))
    calls = []

    def train(*args):
        calls.append(tuple(int(x) for x in args[-2:]))
        return 0.0, 0.0, 0.0, False, 0.0, False, 0, 0

    path = LayoutPath(config, spec, None, store, [], train=train, estimate=None)
    batch = episodic_batch(spec, 20, 3, seed=22).batch
    with pytest.raises(RuntimeError, match=r"baseline='optimal_time': something else writes "
                                           r"the memory's variables \(baseline_memory/num or "
                                           r"/horizon\) while this agent updates.* changed "
                                           r"under two updates in a row, and nothing was "
                                           r"applied"):
        path.update(batch)
    assert calls == [(16, 3), (16, 3)]


def held_memory(store: dict):
    """A ``HeldMemory`` of ``optimal_time`` over P = 2 weights, held in ``store``."""
    return HeldMemory(0.5, "optimal_time", 2, lambda: dict(store), store.update)


@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_the_twins_read_the_rows_as_the_full_values_give_them(impl):
    """``held_rows`` gives ``optimal_time``'s rows and horizon without the sums (the twins'
    ``read_rows``, then the record each update's computation reports): the same pair as a
    ``HeldMemory`` over the twin's full ``read`` reads, empty and after each update (the
    first widens an empty memory, the second a narrower one)."""
    spec = KINDS["categorical_mlp"]
    config = ReinforceConfig(dtype="float64", baseline="optimal_time", baseline_memory=0.7,
                             optimizer="sgd", num_envs=3, num_steps=20)
    agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=1))
    memory = agent.update_path.memory
    from_values = HeldMemory(0.7, "optimal_time", memory.width, memory._read,  # noqa: SLF001
                             memory._write)  # noqa: SLF001

    def read_now():
        from_values.forget_rows()
        return from_values.held_rows()

    seen = [memory.held_rows()]
    for seed in (22, 21):
        assert memory.held_rows() == read_now()
        assert agent.update(episodic_batch(spec, 20, 3, seed=seed).batch)["applied"]
        seen.append(memory.held_rows())
    assert memory.held_rows() == read_now()
    agent.close()
    # Empty: no row; then the grids' widths (8, then 16 cells) with the longest episode.
    assert seen[0] == (0, 0) and 0 < seen[1][1] <= seen[1][0] < seen[2][0], seen


@pytest.mark.parametrize("impl", ("graph", "eager"))
def test_a_memory_at_the_grid_width_updates_as_the_narrower_one(impl, monkeypatch):
    """Three ``optimal_time`` updates with the memory widened to the grid (the path's own)
    and with ``widen`` switched off (the memory as the computation wrote it, continued
    inside it) end at the same weights and memory, bit for bit; the widened memory holds
    the grid's rows before every update."""
    spec = KINDS["categorical_mlp"]
    # Grids 8, 16, 16 cells wide: the second update widens a memory of 8 rows.
    cases = [episodic_batch(spec, 20, 3, seed=s) for s in (22, 21, 23)]
    config = ReinforceConfig(dtype="float64", baseline="optimal_time", baseline_memory=0.7,
                             optimizer="sgd", num_envs=3, num_steps=20)
    ends, rows = [], []
    for widen in (HeldMemory.widen, lambda self, rows: None):
        monkeypatch.setattr(HeldMemory, "widen", widen)
        agent = agent_class(impl)(spec, config, weights=random_weights(spec, seed=1))
        path = agent.update_path
        for case in cases:
            width = path.layout(case.batch).mask.shape[1]  # the path widens here
            rows.append((width, path.memory.held_rows()[0]))
            assert agent.update(case.batch)["applied"]
        ends.append((agent.get_weights(), path.memory.state()))
        agent.close()
    (w_wide, m_wide), (w_narrow, m_narrow) = ends
    assert all(np.array_equal(w_wide[n], w_narrow[n]) for n in w_wide)
    assert m_wide.keys() == m_narrow.keys() == {"num", "den", "sum_r", "count"}
    assert all(np.array_equal(m_wide[k], m_narrow[k]) for k in m_wide)
    # Widened, the memory has the grid's rows before each update (from empty, then from 8
    # rows to 16); not widened, only where the last grid was as wide.
    assert [w == held for w, held in rows] == [True] * 3 + [False, False, True], rows
    assert rows[0][0] < rows[1][0] == rows[2][0], rows
