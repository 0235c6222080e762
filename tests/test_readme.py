"""The README's two set-up commands stay true: CI runs the test one verbatim, the main job exists."""
from __future__ import annotations

import re
from pathlib import Path

from pgtwin.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    quick_start = text[text.index("## Quick start"):text.index("## What you can run")]
    return re.findall(r"```bash\n(.+?)\n```", quick_start)


def test_readme_has_two_commands_main_job_then_tests():
    main_job, tests = readme_commands()
    assert main_job == 'pip install -e ".[test]" && pgtwin demo'
    assert tests == ('pip install -e ".[test]" && python -m pytest -q -n auto --maxprocesses 4 '
                     '--dist loadfile')


def test_ci_runs_the_readme_test_command_verbatim():
    _, tests = readme_commands()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert tests in ci_lines


def test_the_main_job_is_a_pgtwin_command():
    main_job, _ = readme_commands()
    command = main_job.split("pgtwin ", 1)[1].split()[0]
    args = build_parser().parse_args([command])
    assert callable(args.run)
