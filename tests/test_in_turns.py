"""benchmarks/in_turns.py: rounds in turns, the median of the round medians, and the ratio to
the twin's reference entry."""
from __future__ import annotations

import pytest

from benchmarks import in_turns


def test_median_of_rounds_and_ratio_to_the_same_twins_none():
    rounds = {("graph", "none"): [2.0, 2.4, 1.8],          # median 2.0
              ("graph", "optimal_time"): [9.0, 8.0, 10.0],  # median 9.0: 9 / 2 = 4.5x
              ("eager", "none"): [4.0, 3.0],                 # median of two: 3.5
              ("eager", "optimal_time"): [7.0, 7.0],         # 7 / 3.5 = 2.0x
              ("other", "optimal_time"): [1.0]}              # no none of its own: no ratio
    got = in_turns.summary(rounds, "none")
    assert [(t, b) for t, b, _, _ in got] == list(rounds)
    assert got[0][2:] == (2.0, 1.0)
    assert got[1][2:] == (9.0, 4.5)
    assert got[3][2:] == (7.0, 2.0)
    assert got[4][2:] == (1.0, None)


def test_a_round_is_the_median_of_its_timed_calls(monkeypatch):
    # perf_counter reads 0, 1 | 1, 4 | 4, 6 (s): calls of 1, 3 and 2 s, median 2 s = 2000 ms.
    clock = iter([0.0, 1.0, 1.0, 4.0, 4.0, 6.0])
    monkeypatch.setattr(in_turns.time, "perf_counter", lambda: next(clock))
    calls = []
    assert in_turns.round_median(lambda: calls.append(1), 3) == pytest.approx(2000.0)
    assert len(calls) == 3


def test_every_variant_runs_once_per_round_in_order():
    order = []
    variants = {("graph", "a"): lambda: order.append("a"), ("graph", "b"): lambda: order.append("b")}
    got = in_turns.in_turns(variants, rounds=3, calls=2)
    # by hand: each round is a's two calls, then b's two
    assert order == ["a", "a", "b", "b"] * 3
    assert list(got) == list(variants) and all(len(v) == 3 for v in got.values())


def test_the_reference_is_named_by_the_caller():
    rounds = {("eager", "write_floor"): [2.0], ("eager", "analytic"): [2.5]}  # 2.5 / 2 = 1.25x
    assert in_turns.summary(rounds, "write_floor")[1][2:] == (2.5, 1.25)
    assert in_turns.summary(rounds, "none")[1][3] is None  # no such entry: no ratio


def test_the_report_prints_each_variant_against_the_reference(monkeypatch, capsys):
    # Every call takes 2 ms (floor) or 3 ms (analytic) on a fake clock: ratio 1.5x.
    now = [0.0]
    monkeypatch.setattr(in_turns.time, "perf_counter", lambda: now[0])

    def takes(ms):
        def call():
            now[0] += ms / 1e3
        return call
    args = in_turns.parser("d", rounds=2, calls=3).parse_args([])
    assert (args.batch_size, args.rounds, args.calls, args.twins) == (2048, 2, 3, ["graph", "eager"])
    rounds = in_turns.report({("graph", "floor"): takes(2.0), ("graph", "analytic"): takes(3.0)},
                             args, "calls", "floor")
    assert rounds[("graph", "analytic")] == pytest.approx([3.0, 3.0])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "B = 2048, 2 rounds of 3 calls each, in turns"
    assert "3.00 ms   1.50x floor (per round  1.50x)" in lines[2]


def test_the_median_of_the_rounds_own_ratios():
    # By hand: round ratios 8/2 = 4, 12/3 = 4, 10/5 = 2 -> median 4.0; the ratio of the
    # medians is 10 / 3 = 3.33x, which the slow third round's reference pulls down.
    rounds = {("graph", "none"): [2.0, 3.0, 5.0], ("graph", "optimal_time"): [8.0, 12.0, 10.0],
              ("eager", "optimal_time"): [1.0]}  # no reference of its own: left out
    got = in_turns.round_ratios(rounds, "none")
    assert got == {("graph", "none"): 1.0, ("graph", "optimal_time"): 4.0}
    assert in_turns.summary(rounds, "none")[1][3] == pytest.approx(10.0 / 3.0)


def test_rounds_of_another_count_than_the_reference_get_no_round_ratio(capsys):
    rounds = {("graph", "none"): [2.0, 2.0], ("graph", "b"): [3.0]}
    assert in_turns.round_ratios(rounds, "none") == {("graph", "none"): 1.0}
    in_turns.print_summary(rounds, "none")
    lines = capsys.readouterr().out.splitlines()
    assert "1.50x none   rounds: 3.00" in lines[1]  # the ratio of medians only
    assert "(per round  1.00x)" in lines[0]
