"""Per-sample gradients timed in turns: the steadier reading of issue 14.3's ``analytic`` /
``write_floor`` ratio.

``python -m benchmarks.per_sample_rounds [--batch-size 2048] [--rounds 15] [--calls 10]
[--twins graph eager] [--methods write_floor analytic vectorized]`` builds each twin's agent
(``benchmarks.test_per_sample.agent``, CartPole MLP (64, 64)) and each method's call as the
``per-sample`` pytest group times it (``benchmarks.test_per_sample.method_call``), warms
each up with two calls, then times them in turns (``benchmarks.in_turns``). It prints, per
twin and method, the median of the round medians, the rounds, and the ratio to the twin's
``write_floor``.

Why not the pytest group: it times the entries one after another, so the machine's drift
between them enters their ratio. As there, each call's result is held until the next call
has returned, as a caller that uses it holds it; a result dropped at once lets the next call
write a buffer still partly in the caches, which on the EPYC VM read about 1.0x against
1.28x (docs/benchmarks.md section 3).
"""
from __future__ import annotations

from benchmarks import in_turns
from benchmarks.test_per_sample import agent, inputs, method_call

METHODS = ("write_floor", "write_floor_rows", "aggregated", "analytic", "vectorized",
           "sq_norms")


def main(argv: list[str] | None = None) -> None:
    parser = in_turns.parser(__doc__.splitlines()[0], rounds=15, calls=10)
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
    in_turns.report(calls, args, "calls", "write_floor")


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    main()
