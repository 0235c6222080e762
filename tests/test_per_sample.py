"""Per-sample gradients in both twins: every method against the loop reference, and the loop
reference against finite differences.

The reference (``method='loop'``) is one gradient per sample: a one-row batch through the
ordinary ``tf.gradients`` / ``GradientTape`` of ``log pi``. It is itself checked against
central finite differences of the twin's forward pass (float64), which involves no TF
gradient code at all. One agent per (twin, kind, dtype) serves every batch size: the legacy
twin must not grow its graph per batch size, the eager one must not retrace.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin.twins import agent_class

from tests.graph_ops import compiled_calls, scope_op_types
from tests.per_sample_cases import BATCH_SIZES, KINDS, MLP_KINDS, random_inputs, random_weights

TWINS = ("graph", "eager")
DTYPES = ("float32", "float64")
TOL = {"float64": dict(rtol=1e-9, atol=1e-12), "float32": dict(rtol=2e-4, atol=2e-6)}
LOOP_OPS = {"While", "StatelessWhile", "Enter", "Exit", "NextIteration", "LoopCond"}


def make_agent(impl: str, kind: str, dtype: str, xla: bool = True):
    spec = KINDS[kind]
    return agent_class(impl)(spec, ReinforceConfig(dtype=dtype, jit_compile=xla),
                             weights=random_weights(spec))


def flat_sq_norms(grads: dict[str, np.ndarray]) -> np.ndarray:
    return sum(np.sum(g.reshape(g.shape[0], -1).astype(np.float64) ** 2, axis=1)
               for g in grads.values())


def _method_cases() -> list[tuple[str, str, str, bool]]:
    """Every kind x dtype with one twin, alternating so that each twin meets every kind once
    and both dtypes (suite time: a case is ~5-20 s of compiles and the loop reference).
    parity_tests/test_per_sample_parity.py holds the other twin's methods to this one's on
    every kind x dtype. ``jit_compile`` alternates too (XLA's compiles are about half of a
    case): each twin meets XLA (with its bucket padding) on an MLP and an LSTM, and each kind
    meets it once; the other cases run the methods as ``jit_compile=False`` users do."""
    cases = [(k, d) for k in KINDS for d in DTYPES]
    return [(TWINS[(i + i // 2) % 2], k, d, (i + i // 4) % 2 == 0)
            for i, (k, d) in enumerate(cases)]


@pytest.mark.parametrize("impl,kind,dtype,xla", _method_cases())
def test_every_method_agrees_with_loop(impl, kind, dtype, xla):
    agent = make_agent(impl, kind, dtype, xla)
    methods = ("vectorized", "analytic")
    ops_after_first = None
    # B = 1 (the one-row edge) for the MLPs only, to keep the suite's time: each size is a
    # compile of every method, ~2 s per LSTM case; the LSTMs keep B = 7 (padded) and 256.
    for size in BATCH_SIZES if kind in MLP_KINDS else BATCH_SIZES[1:]:
        obs, actions = random_inputs(agent.spec, size, seed=size, dtype=agent.config.dtype)
        # The loop on every row up to B = 7; at B = 256 on every 8th row and the last, 33
        # rows (a sample's gradient is its own row's, so the batched methods' 256 rows are
        # checked on those 33; the eager loop's 256 tapes were 2-6 s a case).
        rows = np.arange(size) if size <= 8 else np.unique(np.r_[np.arange(0, size, 8), size - 1])
        ref = agent.per_sample_gradients(obs[rows], actions[rows], method="loop")
        assert list(ref) == list(agent.spec.weight_shapes())
        for name, shape in agent.spec.weight_shapes().items():
            assert ref[name].shape == (len(rows), *shape)
            assert ref[name].dtype == np.dtype(dtype)
        scale = max(float(np.abs(g).max()) for g in ref.values())
        assert scale > 1e-3  # the comparison below is not between zeros
        for method in methods:
            got = agent.per_sample_gradients(obs, actions, method=method)
            for name in ref:
                assert got[name].shape == (size, *agent.spec.weight_shapes()[name])
                np.testing.assert_allclose(got[name][rows], ref[name], rtol=TOL[dtype]["rtol"],
                                           atol=TOL[dtype]["atol"] * scale,
                                           err_msg=f"{impl} {kind} {dtype} B={size} {method} {name}")
        sq = agent.per_sample_sq_norms(obs, actions)
        assert sq.shape == (size,)
        np.testing.assert_allclose(sq[rows], flat_sq_norms(ref), rtol=TOL[dtype]["rtol"] * 10,
                                   err_msg=f"{impl} {kind} {dtype} B={size} sq_norms")
        if impl == "graph":  # one graph for every batch size: nothing is added after B = 1
            count = len(agent.graph.get_operations())
            ops_after_first = ops_after_first or count
            assert count == ops_after_first, f"the graph grew at B={size}"
    if impl == "eager":
        assert set(agent._per_sample_ops().trace_counts().values()) == {1}  # noqa: SLF001
    agent.close()


@pytest.mark.parametrize("kind", tuple(KINDS))
@pytest.mark.parametrize("impl", TWINS)
def test_loop_reference_matches_finite_differences(impl, kind):
    """Central differences of log pi(a_i|s_i) in float64, on 25 weight elements per sample."""
    agent = make_agent(impl, kind, "float64")
    obs, actions = random_inputs(agent.spec, 2, seed=3, dtype=agent.config.dtype)
    ref = agent.per_sample_gradients(obs, actions, method="loop")
    weights = agent.get_weights()
    rng = np.random.default_rng(0)
    elements = [(name, tuple(rng.integers(0, d) for d in w.shape))
                for name, w in weights.items() for _ in range(max(1, 25 // len(weights)))]
    eps = 1e-6
    for name, index in elements:
        logp = []
        for sign in (1.0, -1.0):
            moved = {k: v.copy() for k, v in weights.items()}
            moved[name][index] += sign * eps
            agent.set_weights(moved)
            logp.append(agent.log_prob(obs, actions))
        fd = (logp[0] - logp[1]) / (2 * eps)  # [B]: one derivative per sample
        np.testing.assert_allclose(ref[name][(slice(None), *index)], fd, rtol=1e-6, atol=1e-8,
                                   err_msg=f"{impl} {kind} {name}{list(index)}")
    agent.close()


def op_types(graph_def) -> set[str]:
    """Every op type in a GraphDef, its function library included."""
    types = {node.op for node in graph_def.node}
    for fn in graph_def.library.function:
        types |= {node.op for node in fn.node_def}
    return types


def test_op_types_sees_a_while_loop():
    """The check below can fail: tf.map_fn (a while loop) is caught, in a function body too."""
    fn = tf.function(lambda x: tf.map_fn(tf.square, x), input_signature=[tf.TensorSpec([None])])
    assert op_types(fn.get_concrete_function().graph.as_graph_def()) & LOOP_OPS


@pytest.mark.parametrize("kind", ("categorical_mlp", "gaussian_lstm"))
@pytest.mark.parametrize("impl", TWINS)
def test_vectorized_has_no_while_loop(impl, kind):
    """pfor vectorised every op (``fallback_to_while_loop=False`` would raise otherwise)."""
    agent = make_agent(impl, kind, "float32")
    agent.per_sample_gradients(*random_inputs(agent.spec, 3, dtype=agent.config.dtype), method="vectorized")
    ops = agent._per_sample_ops()  # noqa: SLF001 (the built graph is what is checked)
    if impl == "graph":
        graph_def = agent.graph.as_graph_def()
        nodes = [n for n in graph_def.node if n.name.startswith("per_sample_vectorized/")]
        assert nodes, "no vectorized ops found under their name scope"
        found = {n.op for n in nodes} | op_types(graph_def)
    else:
        found = op_types(ops._fn("vectorized").get_concrete_function().graph.as_graph_def())  # noqa: SLF001
    assert not found & LOOP_OPS, found & LOOP_OPS
    agent.close()


@pytest.mark.parametrize("xla", (True, False))
def test_graph_twin_builds_a_compiled_method_as_one_function_call(xla):
    """Under ``jit_compile`` the graph twin's ``analytic`` and ``vectorized`` are each one op of
    its graph: a call of one function marked for XLA, with the forward and backward pass
    (their MatMuls) inside it, so that its Session runs one compiled launch. Without
    ``jit_compile`` the same ops are in the graph itself and nothing is compiled."""
    agent = make_agent("graph", "categorical_mlp", "float32", xla=xla)
    inputs = random_inputs(agent.spec, 3, dtype=agent.config.dtype)
    for method in ("analytic", "vectorized"):
        agent.per_sample_gradients(*inputs, method=method)
        scope = f"per_sample_{method}"
        calls = compiled_calls(agent.graph, scope)
        outer = scope_op_types(agent.graph, scope)
        if xla:
            assert len(calls) == 1 and calls[0].startswith(f"__inference_{scope}_"), calls
            assert "MatMul" not in outer, outer
        else:
            assert not calls and "MatMul" in outer, (calls, outer)
    agent.close()


@pytest.mark.parametrize("kind", MLP_KINDS)
def test_ghost_norms_materialise_no_per_sample_kernel(kind):
    """``per_sample_sq_norms`` of an MLP holds no ``[B, in, out]`` tensor (legacy graph)."""
    agent = make_agent("graph", kind, "float32")
    agent.per_sample_sq_norms(*random_inputs(agent.spec, 3, dtype=agent.config.dtype))
    ranks = {len(t.shape) for op in agent.graph.get_operations()
             if op.name.startswith("per_sample_sq_norms/") for t in op.outputs
             if t.shape.rank is not None}
    assert ranks and max(ranks) <= 2, ranks
    agent.close()


def output_shapes(agent, key: str) -> set[tuple]:
    """Static shapes of every op output a per-sample function ``key`` built."""
    if agent.impl == "graph":
        ops = [op for op in agent.graph.get_operations() if op.name.startswith(f"per_sample_{key}/")]
    else:
        ops = agent._per_sample_ops()._fn(key).get_concrete_function().graph.get_operations()  # noqa: SLF001
    return {tuple(t.shape.as_list()) for op in ops for t in op.outputs if t.shape.rank is not None}


@pytest.mark.parametrize("impl", TWINS)
def test_lstm_ghost_norms_materialise_no_per_sample_kernel(impl):
    """The LSTM's ``per_sample_sq_norms`` (sequence ghost norm: ``[B, K, K]`` Gram matrices)
    holds no ``[B, obs_dim + units, 4 units]`` per-sample kernel gradient; the same check
    finds one in the ``vectorized`` function."""
    agent = make_agent(impl, "gaussian_lstm", "float32")
    kernel = tuple(agent.spec.weight_shapes()["policy/lstm/kernel"])
    agent.per_sample_sq_norms(*random_inputs(agent.spec, 3, dtype=agent.config.dtype))
    agent.per_sample_gradients(*random_inputs(agent.spec, 3, dtype=agent.config.dtype), method="vectorized")

    def holds_kernel(shapes):
        return any(len(s) == 3 and s[1:] == kernel for s in shapes)

    assert not holds_kernel(output_shapes(agent, "sq_norms"))
    assert holds_kernel(output_shapes(agent, "vectorized"))
    agent.close()


@pytest.mark.parametrize("impl", TWINS)
def test_bad_requests_name_the_problem(impl):
    lstm = make_agent(impl, "categorical_lstm", "float32")
    obs, actions = random_inputs(lstm.spec, 2, dtype=lstm.config.dtype)
    with pytest.raises(ValueError, match=r"method='jacobian' is not one of"):
        lstm.per_sample_gradients(obs, actions, method="jacobian")
    with pytest.raises(ValueError, match=r"obs has shape \(2, 4\); expected \[B, 3, 4\]"):
        lstm.per_sample_gradients(obs[:, 0], actions)
    with pytest.raises(ValueError, match=r"actions\[1\] = 7 is out of range"):
        lstm.per_sample_sq_norms(obs, np.array([0, 7]))
    lstm.close()


@pytest.mark.parametrize("impl", TWINS)
def test_a_saturated_row_whose_input_square_overflows_has_a_finite_norm(impl):
    # obs[0] = [3e19, 0, ...]: finite in float32, its square (9e38) is not. The first layer's
    # tanh saturates, so no delta reaches that layer and every gradient of the row is finite;
    # the ghost norm (||a||^2 + 1) ||delta||^2 must be 0 for that layer, not inf * 0 = NaN.
    agent = make_agent(impl, "categorical_mlp", "float32")
    obs, actions = random_inputs(KINDS["categorical_mlp"], 2, seed=3)
    obs[0] = 0.0
    obs[0, 0] = 3e19
    norms = agent.per_sample_sq_norms(obs, actions)
    want = flat_sq_norms(agent.per_sample_gradients(obs, actions, method="loop"))
    assert np.all(np.isfinite(norms)), norms
    np.testing.assert_allclose(norms, want, **TOL["float32"])
    agent.close()
