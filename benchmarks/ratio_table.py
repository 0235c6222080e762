"""Ratios between the entries of benchmark groups, over several runs: the tables of docs/benchmarks.md.

Each run (one ``--benchmark-json`` file) gives one ratio per entry: its median over a
reference entry's median in the same group, timed back to back in that run. Over the runs
the table gives the median of those ratios and their range::

    python -m benchmarks.ratio_table run1.json run2.json ... --group "per-sample vs JAX" \\
        --to "jax per_sample" --to "{twin} aggregated"

``--to`` names the reference by its label (``extra_info['label']``, else the test's name);
``{twin}`` stands for the entry's own ``extra_info['twin']``, so ``"{twin} aggregated"`` is
each framework's own aggregated gradient. ``--group`` keeps the groups whose name starts with
it. ``--ms`` adds each entry's median time (median over the runs).
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import OrderedDict


def label(bench: dict) -> str:
    """What the table calls an entry: its ``extra_info['label']``, else the test's name."""
    return bench.get("extra_info", {}).get("label") or bench["name"]


def group_medians(path: str, prefix: str) -> "OrderedDict[str, OrderedDict[str, tuple[float, dict]]]":
    """``{group: {label: (median seconds, extra_info)}}`` of one JSON file, in run order."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    groups: OrderedDict = OrderedDict()
    for bench in doc["benchmarks"]:
        if (bench.get("group") or "").startswith(prefix):
            groups.setdefault(bench["group"], OrderedDict())[label(bench)] = (
                bench["stats"]["median"], bench.get("extra_info", {}))
    return groups


def ratios(runs: list, reference: str) -> "OrderedDict[tuple[str, str], list[float]]":
    """``{(group, label): [ratio per run]}`` to ``reference`` (``{twin}`` filled per entry);
    entries whose reference is missing from a run get no ratio for it."""
    out: OrderedDict = OrderedDict()
    for groups in runs:
        for group, entries in groups.items():
            for name, (median, info) in entries.items():
                ref = reference.format(twin=info.get("twin", ""))
                if ref in entries:
                    out.setdefault((group, name), []).append(median / entries[ref][0])
    return out


def cell(values: list[float], digits: int = 2) -> str:
    """``median (min-max)`` of the values, or the one value."""
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(runs: list, references: list[str], with_ms: bool) -> str:
    """A markdown table: one row per (group, entry), a column per reference."""
    cols = ([] if not with_ms else ["median ms"]) + [f"/ {r}" for r in references]
    lines = ["| group | entry | " + " | ".join(cols) + " |",
             "|---|---|" + "---:|" * len(cols)]
    per_ref = [ratios(runs, r) for r in references]
    keys = OrderedDict((key, None) for groups in runs for group, entries in groups.items()
                       for key in ((group, name) for name in entries))
    for group, name in keys:
        row = []
        if with_ms:
            times = [g[group][name][0] * 1e3 for g in runs if name in g.get(group, {})]
            row.append(cell(times, 3))
        row += [cell(r[(group, name)]) if (group, name) in r else "-" for r in per_ref]
        lines.append(f"| {group} | {name} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="pytest-benchmark JSON files, one per run")
    parser.add_argument("--group", default="", help="keep groups whose name starts with this")
    parser.add_argument("--to", action="append", required=True,
                        help="reference label; {twin} is the entry's own twin (repeatable)")
    parser.add_argument("--ms", action="store_true", help="add the median time in ms")
    args = parser.parse_args(argv)
    runs = [group_medians(p, args.group) for p in args.runs]
    print(table(runs, args.to, args.ms))


if __name__ == "__main__":
    main()
