"""Per-sample gradients and the optimal-scalar update: what they cost against one gradient.

Groups (``pgtwin bench`` reports each figure as a ratio to the group's first entry):

``per-sample: <twin> <kind> B=<n>``  ``aggregated`` (one gradient of the summed loss, fetched
    as numpy, by each twin's fastest path: the reference), then ``vectorized``, ``analytic``, ``sq_norms`` and ``loop``
    (one gradient per sample) through the agent's public methods, numpy out, and
    ``write_floor`` (arrays of the per-sample gradients' shapes, filled with a constant: the
    memory traffic of returning them, with nothing computed; XLA runs a constant fill on one
    thread) and ``write_floor_rows`` (each row filled with its own input value, which XLA
    splits over the cores as it does the outer products: the machine's write bandwidth);
``update baseline: <twin> B=<n>``  ``agent.update`` with ``none`` (the reference), then
    ``optimal_scalar`` (ghost norms + b* + one backward pass) and the episodic baselines (one
    XLA computation over the complete episodes' grid, ``pgtwin/mode_agnostic/episodic_baselines.py``).

``twin`` is ``graph`` (TF1 Session) or ``eager`` (the eager twin's ``tf.function``s). The
CartPole MLP (64, 64) runs at B = 32, 256 and 2048, the LSTM (K = 8, BatteryArbitrage) at
B = 256 and 2048. ``loop`` at B = 2048 is timed in a single round (about a second per
round in the graph twin): ``benchmark.pedantic(rounds=1)``. In CI (``--benchmark-disable``)
every body runs once, as a test.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.conftest import SEED, kind_spec, obs_batch, rollout_batch
from eager.policy_call import direct_callable as direct_callable_eager
from eager.tracing import batch_signatures
from legacy_graph.per_sample import xla_compiled as xla_compiled_graph
from legacy_graph.policy_call import direct_callable as direct_callable_graph
from pgtwin_core.config import ReinforceConfig
from pgtwin_core.specs import init_weights
from pgtwin.twins import agent_class

_AGENTS: dict[tuple, object] = {}


def agent(impl: str, kind_name: str, baseline: str = "none"):
    """One agent per (twin, kind, baseline), at the initial weights (reset on every call)."""
    _, spec = kind_spec(kind_name)
    # lr 1e-6: hundreds of rounds on one batch must not drive the policy to log pi = -inf
    config = ReinforceConfig(baseline=baseline, learning_rate=1e-6)
    weights = init_weights(spec, SEED, dtype=config.dtype)
    key = (impl, kind_name, baseline)
    if key not in _AGENTS:
        _AGENTS[key] = agent_class(impl)(spec, config, weights=weights)
    _AGENTS[key].set_weights(weights)
    return _AGENTS[key]


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    for a in _AGENTS.values():
        a.close()
    _AGENTS.clear()


def aggregated(a):
    """``(obs, actions, adv, w) -> [grad, ...]``: one gradient of the REINFORCE loss over the
    batch, by the fastest path each twin has, so that no ratio flatters the per-sample side:
    a direct Session callable run in the calling thread (graph; without XLA, which measured
    slower for it here; the calling thread measured faster than the Session's pool), and
    an XLA-compiled ``tf.function`` through its direct callable (eager), the same call paths
    the per-sample methods take."""
    if a.impl == "graph":
        return direct_callable_graph(a.session, a.grads,
                                     [a.obs_ph, a.actions_ph, a.advantages_ph, a.weights_ph],
                                     caller_thread=True)
    s = batch_signatures(a.spec, a.config.dtype)
    fn = tf.function(a.weighted_loss.loss_and_grads, autograph=False,
                     input_signature=[s["obs"], s["actions"], s["vector"], s["vector"]],
                     jit_compile=a.config.jit_compile)
    call = direct_callable_eager(fn)
    return lambda obs, act, adv, w: [np.asarray(g) for g in call(obs, act, adv, w)[1:-1]]


def write_floor(a, rows: bool = False):
    """``(obs, actions) -> [array, ...]``: ``[B, *shape]`` arrays of every weight's shape,
    filled from the input and nothing computed: what returning per-sample gradients costs in
    memory traffic alone (XLA-compiled like the per-sample methods).

    ``rows=False``: one value everywhere (``tf.fill``), which XLA writes on one thread.
    ``rows=True``: row i filled with ``obs[i, 0]``; XLA splits such a loop over the cores
    (``outer_dimension_partitions``), as it does the outer products of ``analytic``, so this
    one is the floor a computed write can reach.
    """
    shapes = list(a.spec.weight_shapes().values())

    def fill(obs, actions):
        del actions
        if not rows:
            return [tf.fill([tf.shape(obs)[0], *shape], obs[0, 0]) for shape in shapes]
        value = obs[:, :1]  # [B, 1]: row i's value
        return [tf.broadcast_to(tf.reshape(value, [-1] + [1] * len(shape)),
                                tf.concat([tf.shape(obs)[:1], shape], axis=0))
                for shape in shapes]

    if a.impl == "graph":  # called as the graph twin calls its compiled per-sample ops
        with a.graph.as_default():
            fetch = xla_compiled_graph(fill, [a.obs_ph, a.actions_ph], "write_floor")
        return direct_callable_graph(a.session, fetch, [a.obs_ph, a.actions_ph],
                                     caller_thread=True)
    s = batch_signatures(a.spec, a.config.dtype)
    call = direct_callable_eager(tf.function(fill, autograph=False, jit_compile=True,
                                             input_signature=[s["obs"], s["actions"]]))
    return lambda obs, act: [np.asarray(g) for g in call(obs, act)]


def inputs(spec, dtype: str, size: int):
    rng = np.random.default_rng(SEED)
    actions = (rng.integers(0, spec.action_size, size) if spec.is_discrete
               else rng.standard_normal((size, spec.action_size)).astype(dtype))
    return obs_batch(spec, dtype, size), actions


PER_SAMPLE_CASES = [(impl, kind, size, method)
                    for kind, sizes in (("categorical_mlp", (32, 256, 2048)),
                                        ("gaussian_lstm", (256, 2048)))
                    for size in sizes for impl in ("graph", "eager")
                    for method in ("aggregated", "vectorized", "analytic", "sq_norms", "loop",
                                   "write_floor", "write_floor_rows")
                    if not (kind == "gaussian_lstm" and method in ("loop", "write_floor",
                                                                   "write_floor_rows"))]


def method_call(a, method: str, obs: np.ndarray, actions: np.ndarray) -> Callable[[], object]:
    """``call()``: one run of the per-sample group's entry ``method`` (``PER_SAMPLE_CASES``)
    on ``obs`` and ``actions``, numpy out; ``aggregated`` at advantages 1 and weights
    ``1 / B``."""
    if method == "aggregated":
        fn = aggregated(a)
        adv = np.ones(len(obs), a.config.dtype)
        w = np.full(len(obs), 1.0 / len(obs), a.config.dtype)
        return lambda: fn(obs, actions, adv, w)
    if method == "sq_norms":
        return lambda: a.per_sample_sq_norms(obs, actions)
    if method in ("write_floor", "write_floor_rows"):
        fn = write_floor(a, rows=method == "write_floor_rows")
        return lambda: fn(obs, actions)
    return lambda: a.per_sample_gradients(obs, actions, method)


def warmed_and_timed(benchmark, a, method: str, call, obs: np.ndarray, actions: np.ndarray):
    """``call``'s result, timed by ``benchmark`` after one warm-up call that builds the ops /
    traces the function. ``loop`` warms up on one row (a full round at B = 2048 costs
    seconds and builds nothing more) and is timed in one round above B = 256.

    With benchmarks disabled (CI runs each body once, as a test), ``loop`` above B = 256
    returns that one row's result instead of running 2048 rows of the same per-row code
    (9 s in the eager twin); callers compare it with their reference's first rows."""
    if method == "loop":
        first_row = a.per_sample_gradients(obs[:1], actions[:1], method)
    else:
        call()
    if method == "loop" and len(obs) > 256:
        if benchmark.disabled:
            return first_row
        return benchmark.pedantic(call, rounds=1, iterations=1)
    return benchmark(call)


@pytest.mark.parametrize("impl,kind_name,batch_size,method", PER_SAMPLE_CASES)
def test_per_sample(benchmark, impl, kind_name, batch_size, method):
    a = agent(impl, kind_name)
    obs, actions = inputs(a.spec, a.config.dtype, batch_size)
    benchmark.group = f"per-sample: {impl} {kind_name} B={batch_size}"
    benchmark.extra_info.update(label=method, twin=impl, kind=kind_name, batch_size=batch_size)
    call = method_call(a, method, obs, actions)
    out = warmed_and_timed(benchmark, a, method, call, obs, actions)
    if method == "sq_norms":
        assert out.shape == (batch_size,)
    else:
        grads = out if method in ("aggregated", "write_floor", "write_floor_rows") else list(
            out.values())
        assert len(grads) == len(a.variables) and all(np.isfinite(g).all() for g in grads)
    if impl == "eager":
        assert set(a._per_sample_ops().trace_counts().values()) <= {1}  # noqa: SLF001


UPDATE_CASES = [(impl, size, baseline) for size in (32, 256, 2048) for impl in ("graph", "eager")
                for baseline in ("none", "optimal_scalar", "optimal_scalar_episodic",
                                 "optimal_per_param", "optimal_time")]


@pytest.mark.parametrize("impl,batch_size,baseline", UPDATE_CASES)
def test_update_baseline(benchmark, impl, batch_size, baseline):
    a = agent(impl, "categorical_mlp", baseline)
    batch = rollout_batch("categorical_mlp", batch_size)
    benchmark.group = f"update baseline: {impl} B={batch_size}"
    benchmark.extra_info.update(label=baseline, twin=impl, batch_size=batch_size)
    a.update(batch)  # warm-up
    metrics = benchmark(a.update, batch)
    assert metrics["applied"], metrics
