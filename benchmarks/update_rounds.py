"""Updates with each baseline, timed in turns: the steadier reading of issue 14's update ratios.

``python -m benchmarks.update_rounds [--batch-size 2048] [--rounds 5] [--calls 20]`` builds
each twin's agent per baseline (``benchmarks.test_per_sample.agent``, CartPole MLP (64, 64)),
warms each up with two ``agent.update`` calls on one rollout batch, then runs ``--rounds``
rounds. In each round every (twin, baseline) in turn makes ``--calls`` updates
(``benchmarks.in_turns``). It prints, per twin and baseline, the median of the rounds'
medians, the rounds' medians, and the ratio to the twin's ``none``.
"""
from __future__ import annotations

from benchmarks import in_turns
from benchmarks.test_per_sample import agent, rollout_batch

BASELINES = ("none", "optimal_scalar", "optimal_scalar_episodic", "optimal_per_param",
             "optimal_time")


def main(argv: list[str] | None = None) -> None:
    parser = in_turns.parser(__doc__.splitlines()[0], rounds=5, calls=20)
    parser.add_argument("--baselines", nargs="+", default=list(BASELINES), choices=BASELINES)
    args = parser.parse_args(argv)
    batch = rollout_batch("categorical_mlp", args.batch_size)
    agents = {(twin, b): agent(twin, "categorical_mlp", b)
              for twin in args.twins for b in args.baselines}
    for a in agents.values():  # trace, compile, and the memory's first widening
        a.update(batch)
        a.update(batch)
    updates = {key: (lambda a=a: a.update(batch)) for key, a in agents.items()}
    in_turns.report(updates, args, "updates", "none")


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    main()
