"""What every benchmark group shares: the three ways to run a policy, and the same inputs.

Each group times the same work three ways, on the same spec, weights and data:

``graph``     the TF1 twin (``legacy_graph``): placeholders and one ``Session``;
``eager``     the eager twin's ``tf.function``s with ``tf.config.run_functions_eagerly``:
              the same Python body, executed op by op;
``function``  the eager twin as shipped: ``tf.function`` (one trace, then graph calls).

``pgtwin bench`` reads the figures back by ``group`` and by the ``variant`` in
``benchmark.extra_info`` and reports each as a ratio to ``graph`` (see ``pgtwin/measure/bench.py``).
In CI, ``setup.cfg`` passes ``--benchmark-disable``: each body then runs once, as a test.
"""
from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.rollout import Batch
from pgtwin_core.specs import PolicySpec, init_weights
from pgtwin.parity.twin_parity import POLICY_KINDS, PolicyKind, fixed_batch
from pgtwin.twins import agent_class

from benchmarks.run_mode import benchmarks_enabled

VARIANTS = ("graph", "eager", "function")
"""Always in this order; ``graph`` is the reference (ratio 1.00)."""

VARIANT_LABELS = {
    "graph": "TF1 Session (legacy_graph)",
    "eager": "eager twin, run eagerly",
    "function": "eager twin, tf.function",
    "function_plain": "eager twin, tf.function called plainly",
}
"""Labels of the variants, and of ``function_plain`` (policy step group only)."""

UPDATE_KINDS = ("categorical_mlp", "gaussian_tanh_mlp", "gaussian_lstm")
"""Policy kinds of the update group (``pgtwin.parity.twin_parity.POLICY_KINDS``): categorical MLP,
Gaussian MLP, and the LSTM over a K = 8 window."""

SEED = 0

BENCH_CONFIG = ReinforceConfig(learning_rate=1e-6)
"""Adam as in training, at a step size that leaves the weights where they started: thousands
of rounds on one batch would otherwise drive a Gaussian policy to non-finite values, after
which the guarded update skips its apply and each round does less work."""


@contextlib.contextmanager
def functions_run_eagerly(on: bool):
    """``tf.config.run_functions_eagerly(on)`` for the block, restored after (it is global)."""
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(on)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(before)


_AGENTS: dict[tuple[str, str], object] = {}


def agent_for(variant: str, kind_name: str):
    """The variant's twin for the kind (``BENCH_CONFIG``), at the initial weights.

    Built once per process and shared by the tests (building the LSTM graphs is most of
    what CI's quick mode spends); the weights are reset on every call, so every benchmark
    starts from the same ones. ``eager`` and ``function`` share the eager agent.
    """
    impl = "graph" if variant == "graph" else "eager"
    key = (impl, kind_name)
    _, spec = kind_spec(kind_name)
    weights = init_weights(spec, SEED, dtype=BENCH_CONFIG.dtype)
    if key not in _AGENTS:
        _AGENTS[key] = agent_class(impl)(spec, BENCH_CONFIG, weights=weights)
    agent = _AGENTS[key]
    agent.set_weights(weights)
    return agent


@pytest.fixture(scope="session", autouse=True)
def _close_agents():
    yield
    for agent in _AGENTS.values():
        agent.close()
    _AGENTS.clear()


def kind_spec(kind_name: str) -> tuple[PolicyKind, PolicySpec]:
    """The registered policy kind and its spec."""
    kind = POLICY_KINDS[kind_name]
    return kind, kind.spec()


def shape_for(batch_size: int) -> tuple[int, int]:
    """``(num_envs, num_steps)`` of a rollout of ``batch_size`` samples (T = 32)."""
    num_steps = 32
    if batch_size % num_steps:
        raise ValueError(f"batch_size={batch_size} is not a multiple of T={num_steps}")
    return batch_size // num_steps, num_steps


_BATCHES: dict[tuple[str, int], Batch] = {}


def rollout_batch(kind_name: str, batch_size: int) -> Batch:
    """One rollout of ``batch_size`` steps from the kind's env under the initial weights
    (collected once per process, so every variant trains on the same arrays)."""
    key = (kind_name, batch_size)
    if key not in _BATCHES:
        kind, _ = kind_spec(kind_name)
        num_envs, num_steps = shape_for(batch_size)
        agent = agent_for("graph", kind_name)
        _BATCHES[key] = fixed_batch(kind, agent.spec, agent.dist_params, seed=SEED,
                                    num_envs=num_envs, num_steps=num_steps)
    return _BATCHES[key]


def label(benchmark, variant: str, **info) -> None:
    """Record what ``pgtwin bench`` needs to find this figure: the variant, and ``info``."""
    benchmark.extra_info.update(variant=variant, label=VARIANT_LABELS[variant], **info)


@pytest.fixture(params=VARIANTS)
def variant(request) -> str:
    """Each benchmark runs once per variant."""
    return request.param


def eager_mode(variant: str):
    """The context a variant's calls run in: op by op for ``eager``, else as built."""
    return functions_run_eagerly(variant == "eager")


def obs_batch(spec: PolicySpec, dtype: str, size: int, seed: int = SEED) -> np.ndarray:
    """Observations ``[size, *obs_shape]`` of ``dtype``, standard normal."""
    return np.random.default_rng(seed).standard_normal((size, *spec.obs_shape)).astype(dtype)


def pytest_collection_modifyitems(config, items) -> None:
    """With benchmarking disabled (CI: each body once, as a test), a benchmark parametrized
    over ``batch_size`` runs at its largest only.

    The smaller sizes run the same code at another shape: as a test they add compiles, not
    checks (the per-sample methods are held to their loop at B = 1, 7 and 256 in
    ``tests/test_per_sample.py``, the episodic baselines to numpy on batches of 60-144 steps
    in ``tests/``). They are deselected, which pytest's summary counts, and run whenever
    benchmarks are (``--benchmark-enable``, as ``pgtwin bench`` runs them)."""
    if benchmarks_enabled(config):
        return
    here = os.path.dirname(__file__)
    largest: dict[tuple, int] = {}
    sized = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if str(item.path).startswith(here) and "batch_size" in params:
            rest = tuple(sorted((k, str(v)) for k, v in params.items() if k != "batch_size"))
            key = (str(item.path), item.originalname, rest)
            largest[key] = max(largest.get(key, 0), params["batch_size"])
            sized.append((item, key))
    smaller = {item for item, key in sized if item.callspec.params["batch_size"] < largest[key]}
    if smaller:
        config.hook.pytest_deselected(items=[i for i in items if i in smaller])
        items[:] = [i for i in items if i not in smaller]
