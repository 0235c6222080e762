"""Where an XLA-compiled call spends its time, kernel by kernel (docs/benchmarks.md, sections 3 and 6).

Runs a twin's per-sample method (or the benchmark's ``write_floor``), or ``agent.update`` with
a baseline (``update:BASELINE``), on the CartPole MLP at B = 2048 under TensorFlow's
profiler, with XLA's per-kernel trace on (``--xla_cpu_enable_xprof_traceme``), and prints
the mean time per call of each traced event, how many times a call ran it, and the thread it
ran on (``py``: the calling thread, ``pool``: any other)::

    python -m benchmarks.xla_kernel_times --twin eager --what analytic write_floor
    python -m benchmarks.xla_kernel_times --twin graph --what update:none update:optimal_time

A kernel inside ``optimal_time``'s loop over the grid's H steps runs H times a call (per
thread, the counts add up to H).

Each ``--what`` is profiled ``--rounds`` times for ``--calls`` calls, alternately, in one
process, so they see the same machine.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

import tensorflow as tf  # noqa: E402  (after XLA_FLAGS)
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

WRAPPERS = ("EagerExecute", "TFE_Py", "EagerKernelExecute", "EagerLocalExecute", "__inference",
            "CpuExecutable", "ThunkExecutor::Execute", "KernelAndDeviceFunc", "end: ")
"""Events that enclose the kernels (reported once, as the total, not per kernel)."""
TOTAL = "CpuExecutable::ExecuteAsyncOnStream"


def profile(call, calls: int) -> tuple[collections.Counter, collections.Counter]:
    """``{(thread, event): microseconds per call}`` and ``{(thread, event): runs per call}``
    over ``calls`` calls of ``call``."""
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(calls):
            call()
        tf.profiler.experimental.stop()
        (path,) = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
    times: collections.Counter = collections.Counter()
    runs: collections.Counter = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            thread = "py" if line.name == "python" else "pool"
            for event in line.events:
                key = (thread, plane.event_metadata[event.metadata_id].name[:60])
                times[key] += event.duration_ps / 1e6 / calls
                runs[key] += 1 / calls
    return times, runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--twin", choices=("graph", "eager"), default="eager")
    parser.add_argument("--what", nargs="+", default=["analytic", "write_floor"],
                        help="per-sample methods (analytic, vectorized), write_floor / "
                        "write_floor_rows, or update:BASELINE (agent.update on a rollout batch)")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=16)
    args = parser.parse_args(argv)

    from benchmarks.conftest import agent_for, rollout_batch
    from benchmarks.test_per_sample import agent as baseline_agent
    from benchmarks.test_per_sample import inputs, write_floor

    agent = agent_for("graph" if args.twin == "graph" else "function", "categorical_mlp")
    obs, actions = inputs(agent.spec, "float32", args.batch_size)
    calls = {}
    for what in args.what:
        if what.startswith("update:"):
            updating = baseline_agent(args.twin, "categorical_mlp", what.split(":", 1)[1])
            batch = rollout_batch("categorical_mlp", args.batch_size)
            calls[what] = (lambda a: lambda: a.update(batch))(updating)
        elif what.startswith("write_floor"):
            fn = write_floor(agent, rows=what == "write_floor_rows")
            calls[what] = (lambda f: lambda: f(obs, actions))(fn)
        else:
            calls[what] = (lambda m: lambda: agent.per_sample_gradients(obs, actions, m))(what)
    for call in calls.values():  # build, trace, compile
        call()
        call()
    totals = {what: collections.Counter() for what in calls}
    counts = {what: collections.Counter() for what in calls}
    for _ in range(args.rounds):
        for what, call in calls.items():
            times, runs = profile(call, args.calls)
            totals[what] += times
            counts[what] += runs
    for what, times in totals.items():
        times = {k: v / args.rounds for k, v in times.items()}
        total = sum(v for (_, name), v in times.items() if name == TOTAL)
        print(f"{args.twin} {what}, B = {args.batch_size}: {total:.1f} us per call in XLA")
        kernels = sorted(((v, k) for k, v in times.items()
                          if not any(k[1].startswith(w) for w in WRAPPERS)), reverse=True)
        for v, key in kernels[:args.top]:
            print(f"  {v:9.1f} us  x{counts[what][key] / args.rounds:5.1f}  {key[0]:4s} {key[1]}")
    agent.close()


if __name__ == "__main__":
    # As the pgtwin command line does, before TensorFlow's first op (conftest.py).
    from pgtwin.mode_agnostic.process_tuning import tune_process
    tune_process()
    main()
