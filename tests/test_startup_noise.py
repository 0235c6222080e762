"""TensorFlow's start-up notices obey ``TF_CPP_MIN_LOG_LEVEL`` in the CLI, and building many
eager agents (as ``pgtwin parity`` does) gives no retracing warning (issue 17, item 10).
"""
from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from pgtwin.cli.tensorflow_startup import shown

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABSL_LINE = re.compile(r"^[IWEF]\d{4} ", re.M)


@pytest.mark.parametrize("line, level, want", [
    ("I0000 00:00:1.2 3682 port.cc:153] oneDNN custom operations are on.", 1, False),
    ("I0000 00:00:1.2 3682 port.cc:153] oneDNN custom operations are on.", 0, True),
    ("W0000 00:00:1.2 1 x.cc:1] something to warn about", 1, True),
    ("W0000 00:00:1.2 1 x.cc:1] something to warn about", 2, False),
    ("E0000 00:00:1.2 1 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)", 1, True),
    ("E0000 00:00:1.2 1 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)", 2, False),
    ("E0000 00:00:1.2 1 x.cc:1] a real error", 2, True),
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR", 1, False),
    ("Traceback (most recent call last):", 3, True),  # not TensorFlow's: always replayed
])
def test_start_up_lines_by_level(line, level, want):
    assert shown(line, level) is want


def test_the_cli_start_up_is_quiet_at_level_2(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(
        [sys.executable, "-m", "pgtwin", "train", "--env", "CartPole-v1", "--steps", "32",
         "--num-envs", "2", "--num-steps", "8", "--hidden", "8", "--no-progress",
         "--logdir", str(tmp_path / "run")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert not ABSL_LINE.search(proc.stderr), proc.stderr
    assert "absl::InitializeLog" not in proc.stderr and "oneDNN" not in proc.stderr


def test_many_eager_agents_give_no_retracing_warning():
    import tensorflow as tf

    from eager.agent import ReinforceAgent
    from pgtwin_core.config import ReinforceConfig
    from pgtwin_core.specs import PolicySpec

    log = io.StringIO()
    handler = logging.StreamHandler(log)
    tf.get_logger().addHandler(handler)
    spec = PolicySpec("categorical", (4,), 2, hidden=(8,))
    obs, actions = np.zeros((3, 4), np.float32), np.zeros(3, np.int64)
    try:
        for seed in range(8):  # TF's detector fires from the 5th trace of one key
            agent = ReinforceAgent(spec, ReinforceConfig(), seed=seed)
            agent.log_prob(obs, actions)
            agent.dist_params(obs)
            assert agent.trace_counts()["log_prob"] == 1  # each traced once: no real retrace
    finally:
        tf.get_logger().removeHandler(handler)
    assert "retracing" not in log.getvalue()
