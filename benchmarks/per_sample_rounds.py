"""Per-sample gradients timed in turns: the steadier reading of issue 14.3's ``analytic`` /
``write_floor`` ratio.

``python -m benchmarks.per_sample_rounds [--batch-size 2048] [--rounds 15] [--calls 10]
[--twins graph eager] [--methods write_floor analytic vectorized]`` builds each twin's agent
(``benchmarks.test_per_sample.agent``, CartPole MLP (64, 64)) and each method's call as the
``per-sample`` pytest group times it (``benchmarks.test_per_sample.method_call``), warms
each up with two calls, then times them in turns (``benchmarks.in_turns``). It prints, per
twin and method, the median of the round medians, the rounds, and the ratio to the twin's
``write_floor``.

Why not the pytest group: it times the entries one after another, and on a shared VM the
ratio then moves with the machine's drift between them (docs/benchmarks.md section 3: 1.31x
there, 1.27x in turns, in the same hour).
"""
from __future__ import annotations

import argparse

from benchmarks.in_turns import in_turns, print_summary
from benchmarks.test_per_sample import agent, inputs, method_call

METHODS = ("write_floor", "write_floor_rows", "aggregated", "analytic", "vectorized",
           "sq_norms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--twins", nargs="+", default=["graph", "eager"],
                        choices=["graph", "eager"])
    parser.add_argument("--methods", nargs="+", default=["write_floor", "analytic", "vectorized"],
                        choices=METHODS)
    args = parser.parse_args(argv)
    calls = {}
    for twin in args.twins:
        a = agent(twin, "categorical_mlp")
        obs, actions = inputs(a.spec, a.config.dtype, args.batch_size)
        for method in args.methods:
            calls[(twin, method)] = call = method_call(a, method, obs, actions)
            call()  # traces and compiles
            call()
    rounds = in_turns(calls, args.rounds, args.calls)
    print(f"B = {args.batch_size}, {args.rounds} rounds of {args.calls} calls each, in turns")
    print_summary(rounds, "write_floor")


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.cpu_allocator import use_reusing_allocator
    use_reusing_allocator()
    main()
