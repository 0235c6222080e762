"""Argument errors a command finds after parsing name the subcommand (issue 17, item 10):
``pgtwin convert-checkpoint: error: ...``, as argparse's own errors do, not ``pgtwin: error:``."""
from __future__ import annotations

import pytest

from pgtwin.cli import main


@pytest.mark.parametrize("argv, prog, message", [
    (["convert-checkpoint", "src", "dst", "--history", "0"], "pgtwin convert-checkpoint",
     "--history must be >= 1, got 0"),
    (["bench", "--plot", "ratios.svg"], "pgtwin bench",
     "--plot: expected a .png file name, got 'ratios.svg'"),
])
def test_errors_after_parsing_name_the_subcommand(capsys, argv, prog, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"usage: {prog} " in err and f"{prog}: error: {message}" in err, err
