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


def test_ctrl_c_outside_a_commands_own_handler_is_one_line_and_130(capsys, monkeypatch):
    # e.g. while TensorFlow is imported, before pgtwin train's run has started
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr("pgtwin.cli.tensorflow_startup.import_tensorflow", interrupted)
    assert main(["train", "--env", "CartPole-v1", "--logdir", "unused"]) == 130
    assert capsys.readouterr().err == "pgtwin train: interrupted\n"
