"""``pgtwin bench``: run the benchmark suites and print one table per group.

Each table gives pytest-benchmark's median per variant and its ratio to the TF1 Session
twin (1.00), under a line naming the machine. ``--json`` keeps every figure with its group and
name, ``--plot`` draws the ratios as bars, ``--markdown`` writes the tables for
docs/benchmarks.md. Exit code 0 on success, 1 if a benchmark failed, 2 where ``-k`` selects
no benchmark or pytest refuses the expression.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from pgtwin.cli.argument_types import output_file

HELP = "time both twins (graph, eager, tf.function) and print ratios to the TF1 Session twin"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``pgtwin bench`` and its options."""
    p = subparsers.add_parser(
        "bench", help=HELP,
        description=HELP + ". Runs benchmarks/ under pytest-benchmark in a child process; "
                           "figures are its medians. The machine is named in the output: "
                           "timings on a loaded machine are noisy, ratios less so.")
    p.add_argument("--quick", action="store_true",
                   help="few rounds per figure (rougher figures; set-up still dominates: "
                        "see the time it says when it starts)")
    p.add_argument("--json", metavar="FILE", default=None, type=output_file,
                   help="write every figure (group, name, median, ratio, ...) and the machine")
    p.add_argument("--plot", metavar="FILE.png", default=None, type=output_file,
                   help="write a bar chart of the ratios")
    p.add_argument("--markdown", metavar="FILE", default=None, type=output_file,
                   help="write the tables as markdown (for docs/benchmarks.md)")
    p.add_argument("-k", dest="keyword", metavar="EXPR", default=None,
                   help="only the benchmarks pytest -k EXPR selects, e.g. 'policy_step'")
    p.set_defaults(run=run)
    return p


def command_line(args: argparse.Namespace) -> str:
    """The ``pgtwin bench`` command that reproduces this run (recorded with its figures)."""
    parts = ["pgtwin", "bench"] + (["--quick"] if args.quick else [])
    for flag, value in (("-k", args.keyword), ("--json", args.json), ("--plot", args.plot),
                        ("--markdown", args.markdown)):
        if value is not None:
            parts += [flag, value]
    return shlex.join(parts)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the suites, print the tables, write the requested files."""
    from pgtwin.measure import bench

    if args.plot is not None and not args.plot.lower().endswith(".png"):
        parser.error(f"--plot: expected a .png file name, got {args.plot!r}")
    command = command_line(args)
    machine = bench.machine_info()
    how = (f"quick mode: {bench.QUICK_ESTIMATE}" if args.quick
           else "full mode: several times the quick mode's time")
    print(f"pgtwin bench: running {bench.benchmarks_dir()} ({how}); a line per suite file "
          "as it finishes...", file=sys.stderr, flush=True)
    start = time.monotonic()
    try:
        doc = bench.run_suites(args.quick, args.keyword,
                               progress=lambda text: print(f"pgtwin bench: {text}",
                                                           file=sys.stderr, flush=True))
    except bench.SelectionError as err:
        print(f"pgtwin bench: -k {args.keyword!r}: {err}; list the benchmarks with "
              f"python -m pytest {bench.benchmarks_dir()} --collect-only -q", file=sys.stderr)
        return 2
    except (RuntimeError, FileNotFoundError) as err:
        print(f"pgtwin bench: {err}", file=sys.stderr)
        return 1
    print(f"pgtwin bench: measured in {time.monotonic() - start:.0f} s", file=sys.stderr)
    machine["load_average_after"] = bench.machine_info()["load_average"]
    figs = bench.figures(doc)
    print(bench.machine_line(machine))
    print()
    print(bench.tables(figs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(bench.report(figs, machine, command), f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Command: `{command}`\n\nMachine: {bench.machine_line(machine)}\n\n"
                    + bench.tables(figs, markdown=True) + "\n")
    if args.plot:
        bench.plot(figs, args.plot, title=bench.machine_line(machine))
    return 0
