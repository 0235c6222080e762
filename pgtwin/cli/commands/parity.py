"""``pgtwin parity``: the twin-vs-twin ladder for every policy kind, as a table or JSON.

Exit code 0 when every rung passes for every policy kind and dtype, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from pgtwin_core.config import DTYPES
from pgtwin.cli.argument_types import non_negative_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``parity`` and its options."""
    p = subparsers.add_parser(
        "parity", help="run the legacy_graph vs eager parity ladder",
        description="Build both twins from the same spec and weights and compare them rung by "
                    "rung (variables, outputs, loss, gradients, weights after optimizer steps, "
                    "a training run) for every policy kind. Exit code 1 on any failure.")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="run one dtype only (default: both)")
    p.add_argument("--json", action="store_true",
                   help='print {"ok": bool, "rows": [{"policy", "dtype", "rung", "max_abs", '
                        '"max_rel", "ok", ...}]} instead of a table')
    p.add_argument("--policy", action="append", metavar="KIND",
                   help="run this policy kind only (repeatable; default: all of "
                        "categorical_mlp, gaussian_tanh_mlp, gaussian_sigmoid_mlp, gaussian_lstm)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of weights, envs and sampling")
    p.add_argument("--value", action="store_true",
                   help="also compare the value baseline's network (baseline='value': its "
                        "variables, V, loss, gradients, fit steps, 3 training updates), as "
                        "policy KIND+value")
    p.add_argument("--skip-training", action="store_true",
                   help="leave out rung 6 (the 20-update training runs), the slow one")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the ladders, print the result, return the exit code."""
    from pgtwin.cli.tensorflow_startup import import_tensorflow

    import_tensorflow()  # before pgtwin.parity.ladder imports it, so its start-up lines are filtered
    from pgtwin.parity.ladder import TWIN_RUNGS
    from pgtwin.parity.twin_parity import POLICY_KINDS, run_ladder, rung_summary
    from pgtwin.parity.value_parity import run_value_ladder

    kinds = args.policy or list(POLICY_KINDS)
    unknown = [k for k in kinds if k not in POLICY_KINDS]
    if unknown:
        parser.error(f"--policy: unknown kind(s) {unknown}; choose from {list(POLICY_KINDS)}")
    dtypes = [args.dtype] if args.dtype else list(DTYPES)
    rungs = tuple(r for r in TWIN_RUNGS if not (args.skip_training and r == "training"))

    rows, summaries = [], []
    for kind in kinds:
        for dtype in dtypes:
            start = time.perf_counter()
            report = run_ladder(kind, dtype, seed=args.seed, rungs=rungs)
            rows += rung_summary(report, kind, dtype)
            summaries.append(f"{kind}/{dtype}: {report.summary()}")
            print(f"pgtwin parity: {kind} {dtype}: {'ok' if report.ok else 'FAILED'} "
                  f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
            if args.value:
                start = time.perf_counter()
                report = run_value_ladder(kind, dtype, seed=args.seed)
                rows += rung_summary(report, f"{kind}+value", dtype)
                summaries.append(f"{kind}+value/{dtype}: {report.summary()}")
                print(f"pgtwin parity: {kind}+value {dtype}: "
                      f"{'ok' if report.ok else 'FAILED'} ({time.perf_counter() - start:.1f} s)",
                      file=sys.stderr)
    ok = all(r["ok"] for r in rows)
    if args.json:
        print(json.dumps({"ok": ok, "rows": rows}))
    else:
        print(format_table(rows))
        print("\n".join(summaries))
        print("parity OK" if ok else "parity FAILED")
    return 0 if ok else 1


def format_table(rows: list[dict]) -> str:
    """Rows of ``rung_summary`` as a fixed-width text table."""
    header = ("policy", "dtype", "rung", "max_abs", "max_rel", "result", "worst / note")

    def err(x):
        return "inf" if x is None else f"{x:.3e}"

    lines = [(r["policy"], r["dtype"], r["rung"], err(r["max_abs"]), err(r["max_rel"]),
              "pass" if r["ok"] else "FAIL", r["note"] or r["worst"]) for r in rows]
    widths = [max([len(h)] + [len(line[i]) for line in lines]) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    return "\n".join(out + [fmt.format(*line) for line in lines])
