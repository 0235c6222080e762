"""``pgtwin train`` refuses an env with unsupported spaces before it imports TensorFlow
(issue 17, item 8): the refusal is exit 2 with the spaces named, and ``tensorflow`` is not
in ``sys.modules`` when it comes (checked in a fresh interpreter, where nothing else has
imported it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {
    "Blackjack-v1": "'Blackjack-v1' has observation space Tuple",
    "tests.cli_envs:DictObsCartPole-v0": "has observation space Dict",
    "tests.cli_envs:MultiDiscreteCartPole-v0": "has action space MultiDiscrete([2 2]), which is "
                                               "neither Discrete nor Box: not supported yet; a "
                                               "MultiDiscrete([n1, n2]) or MultiBinary(k) can "
                                               "be re-encoded as one Discrete(n1 * n2)",
    "tests.cli_envs:GridActionCartPole-v0": "has action space Box(-1.0, 1.0, (2, 1), float32) of "
                                            "shape (2, 1); a Box action must be 1-D: flatten it "
                                            "with gymnasium.wrappers.TransformAction(env, lambda "
                                            "a: a.reshape((2, 1)), a Box of shape (2,))",
    "FrozenLake-v1": "'FrozenLake-v1' has observation space Discrete(16), which is not a Box: "
                     "wrap the env in gymnasium.wrappers.FlattenObservation, which makes it "
                     "one Box (a Discrete(n) one-hot as n values",
    "tests.cli_envs:NeedsBox2D-v0": "'NeedsBox2D-v0' needs a package that is not installed: "
                                    "Box2D is not installed",
    "tests.cli_envs:NeedsJax-v0": "'NeedsJax-v0' needs a package that is not installed: No "
                                  "module named 'jax'",
    "Taxi-v3": "env id 'Taxi-v3' is deprecated: Environment version v3 for `Taxi` is "
               "deprecated. Please use `Taxi-v4` instead.",
}
PROBE = """
import contextlib, io, json, sys
from pgtwin.cli import main
out = {}
for env_id in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(["train", "--env", env_id, "--logdir", sys.argv[2] + "/" + env_id])
            code = 0
        except SystemExit as exit_info:
            code = exit_info.code
    out[env_id] = [code, err.getvalue(), "tensorflow" in sys.modules]
print(json.dumps(out))
"""


def test_unsupported_spaces_are_refused_before_tensorflow_is_imported(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(CASES)), str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for env_id, message in CASES.items():
        code, err, tf_imported = results[env_id]
        assert code == 2, (env_id, err)
        assert "pgtwin train: error:" in err and message in err, (env_id, err)
        assert not tf_imported, f"{env_id}: refused only after importing TensorFlow"
    assert not os.listdir(tmp_path)  # nothing written either


FAILING = {
    "tests.cli_envs:InitRaisesCartPole-v0": ("tests raised RuntimeError while making the env "
                                             "'InitRaisesCartPole-v0' to check its spaces: "
                                             "the simulator is not running"),
    "tests.raising_env_module:X-v0": ("tests raised RuntimeError while importing the env "
                                      "module 'tests.raising_env_module' (for X-v0): this env "
                                      "module cannot start"),
}


def test_the_env_codes_own_failure_is_reported_cause_first_before_tensorflow(tmp_path):
    # They ended in a bare traceback (exit 1, no pgtwin line), or, for a ValueError of the
    # env's, in a usage error (exit 2) as if the command line were wrong.
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(FAILING)),
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for env_id, message in FAILING.items():
        code, err, tf_imported = results[env_id]
        assert code == 1, (env_id, err)
        assert err.startswith("pgtwin train: error: " + message), (env_id, err)
        assert "Traceback (most recent call last)" in err  # the env's code, to fix it
        assert not tf_imported


def test_an_env_registered_with_only_a_vector_entry_point_is_checked():
    # gymnasium.make cannot make it ("entry_point is not specified"): it ended in a
    # traceback, though the run builds it as a vector env.
    import tests.cli_envs  # noqa: F401  (registers it)
    from pgtwin_core.envs import env_spaces_check

    env_spaces_check("VectorOnlyCartPole-v0")  # supported spaces: no error
