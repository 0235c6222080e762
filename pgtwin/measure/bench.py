"""``pgtwin bench``'s engine: run the ``benchmarks/`` suites, then tabulate their medians.

The figures are pytest-benchmark's own: the suites run under ``pytest --benchmark-enable
--benchmark-json FILE`` in a child process (so the run starts from a fresh TensorFlow,
with nothing global left set), and this module only reads that file back. Each group gets a
table of median times and their ratio to the group's reference: the TF1 Session twin
(``extra_info['variant'] == 'graph'``, or ``impl == 'graph'``), else the group's first entry.
A figure that records ``env_steps`` (the iteration group) also gets env-steps per second.
"""
from __future__ import annotations

import glob
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from pgtwin.mode_agnostic.cpu_allocator import ALLOCATOR_VARIABLE

QUICK_OPTIONS = ("--benchmark-min-rounds=3", "--benchmark-max-time=0.1",
                 "--benchmark-warmup=off")
"""A few rounds per figure: rougher figures, but not a quick run. Every case still builds
its agents and XLA-compiles its functions, which is most of the time (docs/benchmarks.md
times the quick run). ``QUICK_ESTIMATE`` is what the CLI says."""
QUICK_ESTIMATE = "about 10 minutes on 2 cores (589 s measured); -k EXPR runs a subset"
FULL_OPTIONS = ("--benchmark-min-rounds=10", "--benchmark-max-time=1.0",
                "--benchmark-warmup=on", "--benchmark-warmup-iterations=3")
"""At least ten rounds and about a second per figure."""


@dataclass(frozen=True)
class Figure:
    """One benchmark's median, placed in its group."""

    group: str
    name: str
    """The variant's label (or the test's name when it records none)."""
    test: str
    """pytest's name of the benchmark, e.g. ``test_update[graph-categorical_mlp-2048]``."""
    median_s: float
    min_s: float
    iqr_s: float
    rounds: int
    ratio: float
    """``median_s`` over the reference's median (1.00 for the reference itself)."""
    reference: str
    """The name of the group's reference."""
    env_steps_per_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def repo_root() -> str:
    """The source tree holding ``benchmarks/`` (the package is installed editable)."""
    # pgtwin/measure/bench.py -> the folder holding pgtwin/
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def benchmarks_dir() -> str:
    """``<repo>/benchmarks``; ``FileNotFoundError`` naming the path if it is missing."""
    path = os.path.join(repo_root(), "benchmarks")
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"pgtwin bench runs the suites in the source tree's benchmarks/ folder, which is "
            f"not at {path} (is pgtwin installed from a source checkout, pip install -e .?)")
    return path


def pytest_command(json_path: str, quick: bool, keyword: str | None = None,
                   paths: list[str] | None = None) -> list[str]:
    """The child ``pytest`` command line that writes pytest-benchmark's JSON to ``json_path``."""
    cmd = [sys.executable, "-m", "pytest", *(paths or [benchmarks_dir()]), "-v",
           "-p", "no:cacheprovider", "--benchmark-enable", f"--benchmark-json={json_path}",
           "--benchmark-columns=median,iqr,rounds", "--benchmark-sort=name",
           *(QUICK_OPTIONS if quick else FULL_OPTIONS)]
    if keyword:
        cmd += ["-k", keyword]
    return cmd


class SuiteProgress:
    """Turns the child pytest's ``-v`` lines into one line per suite file as it finishes.

    ``say(text)`` gets e.g. ``[2/6] test_update.py: 12 benchmarks in 143.0 s``; ``files``
    is the number of suite files (for ``[i/n]``; None leaves it out).
    """

    _RESULT = re.compile(r"^(?:\S*/)?(test_\w+\.py)::\S+ (PASSED|FAILED|ERROR|SKIPPED)")
    _SKIPPED_FILES = re.compile(r"collected \d+ items? / (\d+) skipped")

    def __init__(self, say, files: int | None = None, clock=time.monotonic):
        self.say, self.files, self.clock = say, files, clock
        self.current: str | None = None
        self.count = self.skipped = self.done = 0
        self.started = self.clock()

    def line(self, text: str) -> None:
        """One line of the child's output."""
        skipped = self._SKIPPED_FILES.search(text)
        if skipped and self.files:  # a file skipped at collection (JAX absent) never ends
            self.files -= int(skipped.group(1))
        match = self._RESULT.match(text)
        if match is None:
            return
        if match.group(1) != self.current:
            self.finish()
            self.current, self.count, self.skipped = match.group(1), 0, 0
        if match.group(2) == "SKIPPED":  # a file whose dependency is absent (JAX) still ends
            self.skipped += 1
        else:
            self.count += 1

    def finish(self) -> None:
        """Report the suite file in progress, if any."""
        if self.current is None:
            return
        self.done += 1
        now = self.clock()
        of = f"/{self.files}" if self.files else ""
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        self.say(f"[{self.done}{of}] {self.current}: {self.count} benchmarks{skipped} in "
                 f"{now - self.started:.1f} s")
        self.current, self.started = None, now


def suite_files(paths: list[str] | None = None) -> list[str]:
    """The suite files the child pytest will run (``benchmarks/test_*.py`` by default)."""
    if paths:
        return [p for p in paths if os.path.basename(p).startswith("test_")]
    return sorted(glob.glob(os.path.join(benchmarks_dir(), "test_*.py")))


def child_environment() -> dict[str, str]:
    """The child pytest's environment: this process's, without what a parent pytest-xdist
    worker sets (``PYTEST_XDIST_*``; with it, pytest-benchmark in the child takes itself for
    an xdist worker and writes no JSON), and TensorFlow's C++ logs at level 2 unless set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


class SelectionError(RuntimeError):
    """The user's ``-k`` selected no benchmark, or pytest refused it (exit 4, a usage
    error: its ``ERROR:`` lines are the message, without the session header before them)."""


def run_suites(quick: bool, keyword: str | None = None, paths: list[str] | None = None,
               echo=None, progress=None) -> dict[str, Any]:
    """Run the suites in a child pytest and return pytest-benchmark's JSON document.

    ``progress(text)`` gets a line as each suite file finishes (:class:`SuiteProgress`).
    Raises :class:`SelectionError` where ``keyword`` selects nothing or pytest refuses it,
    ``RuntimeError`` with pytest's output tail if a benchmark fails (a failing body is a
    bug, not a slow figure) or if nothing was measured.
    """
    with tempfile.TemporaryDirectory(prefix="pgtwin-bench-") as tmp:
        json_path = os.path.join(tmp, "benchmarks.json")
        cmd = pytest_command(json_path, quick, keyword, paths)
        env = child_environment()
        tracker = SuiteProgress(progress or (lambda text: None),
                                None if keyword else len(suite_files(paths)))
        out = []
        with subprocess.Popen(cmd, cwd=repo_root(), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as proc:
            for text in proc.stdout:
                out.append(text)
                tracker.line(text)
        tracker.finish()
        stdout = "".join(out)
        if echo is not None:
            echo(stdout)
        if proc.returncode == 5:  # pytest: no test collected or all deselected
            raise SelectionError(f"no benchmark matched (pytest -k {keyword!r})")
        if proc.returncode == 4:  # pytest: a usage error, which it says on its ERROR lines
            said = [line for line in stdout.splitlines() if line.startswith("ERROR:")]
            raise SelectionError("pytest refused the selection: "
                                 + (" ".join(said) if said else stdout[-2000:]))
        if proc.returncode != 0 or not os.path.exists(json_path):
            tail = stdout[-4000:]
            raise RuntimeError(f"benchmark run failed (pytest exit {proc.returncode}):\n{tail}")
        with open(json_path) as f:
            doc = json.load(f)
    if not doc.get("benchmarks"):
        raise SelectionError(f"no benchmark matched (pytest -k {keyword!r})")
    return doc


def _is_reference(bench: dict[str, Any]) -> bool:
    info = bench.get("extra_info", {})
    return info.get("variant") == "graph" or (
        "variant" not in info and info.get("impl") == "graph")


def figures(doc: dict[str, Any]) -> list[Figure]:
    """Every benchmark of a pytest-benchmark JSON document as a :class:`Figure`, grouped in
    the order the groups first ran, the reference first within each group."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for bench in doc["benchmarks"]:
        groups.setdefault(bench.get("group") or bench["name"], []).append(bench)
    out: list[Figure] = []
    for group, benches in groups.items():
        refs = [b for b in benches if _is_reference(b)]
        ref = refs[0] if len(refs) == 1 else benches[0]
        ordered = [ref] + [b for b in benches if b is not ref]
        ref_median = ref["stats"]["median"]
        for bench in ordered:
            stats, info = bench["stats"], dict(bench.get("extra_info", {}))
            steps = info.get("env_steps")
            out.append(Figure(
                group=group, name=_name(bench), test=bench["name"], median_s=stats["median"],
                min_s=stats["min"], iqr_s=stats["iqr"], rounds=stats["rounds"],
                ratio=stats["median"] / ref_median, reference=_name(ref),
                env_steps_per_s=steps / stats["median"] if steps else None, extra=info))
    return out


def _name(bench: dict[str, Any]) -> str:
    return bench.get("extra_info", {}).get("label") or bench["name"]


def machine_info() -> dict[str, Any]:
    """CPU model, cores, load and the versions that matter, without importing TensorFlow."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "tensorflow": _version("tensorflow-cpu", "tensorflow"),
        "numpy": _version("numpy"),
        "gymnasium": _version("gymnasium"),
        "pytest-benchmark": _version("pytest-benchmark"),
        "platform": platform.platform(),
        # The child pytest's CPU allocator (pgtwin.mode_agnostic.cpu_allocator): large
        # per-sample arrays cost 4-5x more under glibc's malloc than under BFC.
        "tf_cpu_allocator_use_bfc": os.environ.get(ALLOCATOR_VARIABLE),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def format_seconds(seconds: float) -> str:
    """``1.23 ms``-style: three significant digits in s, ms or us."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def machine_line(machine: dict[str, Any]) -> str:
    """One line saying where the figures were taken."""
    load = machine.get("load_average")
    load_text = f", load {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} (1/5/15 min)" if load else ""
    bfc = machine.get("tf_cpu_allocator_use_bfc")
    allocator = "" if bfc is None else f"; {ALLOCATOR_VARIABLE}={bfc}"
    return (f"{machine['cpu']}, {machine['cores']} cores{load_text}; TensorFlow "
            f"{machine['tensorflow']}, numpy {machine['numpy']}, Python {machine['python']}"
            f"{allocator}")


def tables(figs: list[Figure], markdown: bool = False) -> str:
    """One table per group: name, median, ratio to the reference (and env-steps/s)."""
    blocks = []
    for group in dict.fromkeys(f.group for f in figs):
        rows = [f for f in figs if f.group == group]
        steps = any(f.env_steps_per_s for f in rows)
        header = ["variant", "median", f"ratio to {rows[0].name}"] + (["env-steps/s"] if steps else [])
        body = [[f.name, format_seconds(f.median_s), f"{f.ratio:.2f}"]
                + ([f"{f.env_steps_per_s:,.0f}" if f.env_steps_per_s else ""] if steps else [])
                for f in rows]
        blocks.append(_markdown(group, header, body) if markdown else _text(group, header, body))
    return "\n\n".join(blocks)


def _text(title: str, header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([title, line(header), "  ".join("-" * w for w in widths),
                      *(line(r) for r in body)])


def _markdown(title: str, header: list[str], body: list[list[str]]) -> str:
    rows = [header, ["---"] + ["---:"] * (len(header) - 1), *body]
    return "\n".join([f"**{title}**", "", *("| " + " | ".join(r) + " |" for r in rows)])


def report(figs: list[Figure], machine: dict[str, Any], command: str) -> dict[str, Any]:
    """The ``--json`` document: every figure with its group and name, the machine, the command."""
    return {"command": command, "machine": machine, "figures": [asdict(f) for f in figs]}


def plot(figs: list[Figure], path: str, title: str = "") -> None:
    """Horizontal bars of every figure's ratio to its group's reference, drawn from 1.00."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(f.name for f in figs))
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    groups = list(dict.fromkeys(f.group for f in figs))
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(figs) + 0.5 * len(groups) + 1.5))
    y, ticks, labels = 0.0, [], []
    for group in groups:
        for f in [f for f in figs if f.group == group]:
            # From 1.00 (the reference) to the ratio: left is faster, right is slower.
            ax.barh(y, f.ratio - 1.0, left=1.0, color=colors[f.name], height=0.8)
            ax.text(f.ratio, y, f" {f.ratio:.2f}", va="center", fontsize=7)
            ticks.append(y)
            labels.append(f"{group}: {f.name}")
            y -= 1
        y -= 0.6
    ax.axvline(1.0, color="black", linewidth=0.8)
    ratios = [f.ratio for f in figs]
    ax.set_xlim(min(min(ratios), 1.0) / 1.3, max(max(ratios), 1.0) * 1.6)  # room for labels
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("median time / reference's median (TF1 Session twin = 1.00; log scale)")
    ax.set_title(textwrap.fill(title or "pgtwin bench", 90), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
