"""benchmarks/ratio_table.py: ratios within each run, then their median and range over runs."""
from __future__ import annotations

import json

from benchmarks import ratio_table


def _run(tmp_path, name: str, medians: dict[str, tuple[float, str]]) -> str:
    """A pytest-benchmark JSON file with one group ``g: B=1`` and one other group."""
    benches = [{"group": "g: B=1", "name": f"test[{label}]", "stats": {"median": m},
                "extra_info": {"label": label, "twin": twin}}
               for label, (m, twin) in medians.items()]
    benches.append({"group": "other", "name": "test[z]", "stats": {"median": 1.0}, "extra_info": {}})
    path = tmp_path / name
    path.write_text(json.dumps({"benchmarks": benches}))
    return str(path)


def test_ratios_to_a_fixed_and_to_the_own_twin_reference(tmp_path):
    # run 1: ref 2 ms, x agg 1 ms, x method 3 ms, y agg 4 ms, y method 6 ms
    # run 2: ref 2 ms, x agg 2 ms, x method 5 ms, y agg 4 ms, y method 7 ms
    one = _run(tmp_path, "1.json", {"ref": (2e-3, "j"), "x agg": (1e-3, "x"),
                                    "x method": (3e-3, "x"), "y agg": (4e-3, "y"),
                                    "y method": (6e-3, "y")})
    two = _run(tmp_path, "2.json", {"ref": (2e-3, "j"), "x agg": (2e-3, "x"),
                                    "x method": (5e-3, "x"), "y agg": (4e-3, "y"),
                                    "y method": (7e-3, "y")})
    runs = [ratio_table.group_medians(p, "g") for p in (one, two)]
    assert list(runs[0]) == ["g: B=1"]  # --group keeps only the matching group
    fixed = ratio_table.ratios(runs, "ref")
    assert fixed[("g: B=1", "x method")] == [1.5, 2.5]  # 3/2, 5/2
    own = ratio_table.ratios(runs, "{twin} agg")
    assert own[("g: B=1", "x method")] == [3.0, 2.5]  # 3/1, 5/2
    assert own[("g: B=1", "y method")] == [1.5, 1.75]  # 6/4, 7/4
    assert ("g: B=1", "ref") not in own  # twin j has no "j agg": no ratio, not a wrong one
    text = ratio_table.table(runs, ["ref", "{twin} agg"], with_ms=True)
    # x method: median of 3 and 5 ms is 4 ms; ratios 1.5, 2.5 -> median 2.00; 3.0, 2.5 -> 2.75
    assert "| g: B=1 | x method | 4.000 (3.000-5.000) | 2.00 (1.50-2.50) | 2.75 (2.50-3.00) |" in text
    assert "| g: B=1 | ref | 2.000 (2.000-2.000) | 1.00 (1.00-1.00) | - |" in text
