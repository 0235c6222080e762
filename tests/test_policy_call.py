"""The hot-path calls of both twins (``*/policy_call.py``) compute what the public calls do.

Expected values come from numpy on the same inputs (``x @ W + b``, sums), never from the
call under test; the eager ``run_functions_eagerly`` switch and variable updates between
calls are checked through side effects a wrong implementation would miss.
"""
from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import tensorflow as tf

from eager import policy_call as eager_call
from legacy_graph import policy_call as graph_call

tf1 = tf.compat.v1

W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.25]], np.float32)   # [3, 2]
B = np.array([0.1, -0.2], np.float32)
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]], np.float32)      # [2, 3]
# x0 @ W + b = [1 + 1 - 3 + 0.1, -2 + 6 + 0.75 - 0.2] = [-0.9, 4.55]
# x1 @ W + b = [-1 + 0 - 4 + 0.1, 2 + 0 + 1 - 0.2]    = [-4.9, 2.8]
EXPECTED = np.array([[-0.9, 4.55], [-4.9, 2.8]], np.float32)


class EagerLinear(tf.Module):
    def __init__(self):
        super().__init__()
        self.w, self.b = tf.Variable(W), tf.Variable(B)
        self.python_runs = 0  # how often the Python body ran (traces, or eager calls)
        sig = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([None], tf.float32)]
        self.fn = tf.function(self._call, input_signature=sig, autograph=False)
        self.policy = tf.function(lambda x: self._call(x, tf.zeros([tf.shape(x)[0]]))[0],
                                  input_signature=sig[:1], autograph=False)

    def _call(self, x, shift):
        self.python_runs += 1
        y = tf.matmul(x, self.w) + self.b
        return y, tf.reduce_sum(y, axis=1) + shift


def test_eager_direct_callable_matches_numpy_and_returns_flat_outputs():
    m = EagerLinear()
    call = eager_call.direct_callable(m.fn)
    shift = np.array([1.0, -1.0], np.float32)
    y, s = call(X, shift)
    np.testing.assert_allclose(y.numpy(), EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(s.numpy(), EXPECTED.sum(axis=1) + shift, rtol=1e-6)


def test_eager_policy_callable_numpy_out_and_sees_assigned_weights():
    m = EagerLinear()
    call = eager_call.policy_callable(m.policy)
    out = call(X)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-6)
    m.b.assign([1.0, 1.0])  # the captured handle, not a copy: the next call sees it
    np.testing.assert_allclose(call(X), EXPECTED - B + 1.0, rtol=1e-6)


def test_eager_direct_calls_never_retrace_and_honour_run_functions_eagerly():
    m = EagerLinear()
    call = eager_call.direct_callable(m.fn)
    shift = np.zeros(2, np.float32)
    for n in (2, 5, 1):  # other batch sizes: the same trace (dynamic batch dimension)
        call(np.ones((n, 3), np.float32), np.zeros(n, np.float32))
    assert m.python_runs == 1 and m.fn.experimental_get_tracing_count() == 1
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        y, _ = call(X, shift)
        y, _ = call(X, shift)
    finally:
        tf.config.run_functions_eagerly(before)
    assert m.python_runs == 3  # the body ran op by op, twice, as the switch promises
    np.testing.assert_allclose(y.numpy(), EXPECTED, rtol=1e-6)


def test_eager_direct_call_rejects_a_wrong_dtype():
    call = eager_call.direct_callable(EagerLinear().fn)
    with pytest.raises(tf.errors.InvalidArgumentError):
        call(X.astype(np.float64), np.zeros(2, np.float64))


def test_eager_public_fallback_gives_the_same_outputs(monkeypatch):
    # A TensorFlow without the private pieces: the public ConcreteFunction call is used.
    m = EagerLinear()
    direct = eager_call.direct_callable(m.fn)
    monkeypatch.setattr(eager_call, "_direct_call", lambda concrete, executor: None)
    public = eager_call.direct_callable(m.fn)
    policy = eager_call.policy_callable(m.policy)
    shift = np.array([1.0, -1.0], np.float32)
    for a, b in zip(direct(X, shift), public(X, shift)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(policy(X), EXPECTED, rtol=1e-6)


def _graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        w = tf1.get_variable("w", initializer=W)
        b = tf1.get_variable("b", initializer=B)
        counter = tf1.get_variable("counter", initializer=0.0)
        y = tf.matmul(x, w) + b
        bump = counter.assign_add(1.0)
        init = tf1.global_variables_initializer()
    session = tf1.Session(graph=graph)
    session.run(init)
    return session, x, y, b, counter, bump


@pytest.mark.parametrize("caller_thread", [False, True])
def test_graph_direct_callable_fetches_and_runs_targets(caller_thread):
    session, x, y, _, counter, bump = _graph()
    call = graph_call.direct_callable(session, [y], [x], targets=[bump.op],
                                      caller_thread=caller_thread)
    (out,) = call(X)
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-6)
    call(X)
    assert session.run(counter) == 2.0  # the target ran once per call
    session.close()


def test_graph_policy_callable_numpy_out_and_sees_assigned_weights():
    session, x, y, b, _, _ = _graph()
    call = graph_call.policy_callable(session, y, x)
    np.testing.assert_allclose(call(X), EXPECTED, rtol=1e-6)
    with session.graph.as_default():
        session.run(b.assign([1.0, 1.0]))
    np.testing.assert_allclose(call(X), EXPECTED - B + 1.0, rtol=1e-6)
    session.close()


def test_graph_public_fallback_gives_the_same_outputs(monkeypatch):
    session, x, y, _, counter, bump = _graph()
    monkeypatch.setattr(graph_call, "_session_callable", lambda *args: None)
    call = graph_call.direct_callable(session, [y], [x], targets=[bump], caller_thread=True)
    (out,) = call(X)
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-6)
    assert session.run(counter) == 1.0
    np.testing.assert_allclose(graph_call.policy_callable(session, y, x)(X), EXPECTED, rtol=1e-6)
    session.close()


# ------------------------------------------------- the eager policy's input slots
def test_eager_policy_results_stay_put_when_the_slot_is_written_again():
    linear = eager_call.policy_callable(EagerLinear().policy)
    first = linear(X)
    second = linear(2.0 * X)  # (2x) @ W + b = 2 (x @ W + b) - b
    np.testing.assert_allclose(first, EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(second, 2.0 * EXPECTED - B, rtol=1e-6)


def test_input_slot_tensor_shares_the_buffer_memory():
    slot = eager_call.InputSlots().get(X)
    assert slot is not None  # this TensorFlow shares aligned numpy memory
    buffer, tensor = slot
    assert buffer.ctypes.data % eager_call.InputSlots.ALIGN == 0
    assert buffer.shape == X.shape and buffer.dtype == X.dtype
    np.copyto(buffer, X)
    np.testing.assert_array_equal(tensor.numpy(), X)


def test_eager_policy_without_shared_memory_makes_a_tensor_per_call(monkeypatch):
    # Another TensorFlow might copy the buffer: the slot is refused and each call converts.
    monkeypatch.setattr(eager_call.InputSlots, "_make", classmethod(lambda cls, shape, dtype: None))
    call = eager_call.policy_callable(EagerLinear().policy)
    np.testing.assert_allclose(call(X), EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(call(-X), -EXPECTED + 2 * B, rtol=1e-6)  # -(xW) + b


def test_eager_policy_called_from_threads_at_once_keeps_each_threads_input():
    # pgtwin_core.parallel_rollout calls one policy from several threads: a slot per thread.
    call = eager_call.policy_callable(EagerLinear().policy)
    errors = []

    def worker(scale: float):
        for _ in range(200):
            out = call(scale * X)
            if not np.allclose(out, scale * EXPECTED + (1 - scale) * B, rtol=1e-5):
                errors.append((scale, out))
    threads = [threading.Thread(target=worker, args=(s,)) for s in (1.0, -3.0, 0.5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]


# ------------------------------------------------- snapshot_policy: one rollout's calls
def _linear_snapshot(jit_compile: bool = True):
    """``(snapshot, variables, python_runs)``: snapshot_policy of ``x @ w + b`` over a [None, 3]
    input, the weights W and B as variables (the rollout policy's shape of signature)."""
    from pgtwin_core.specs import PolicySpec
    spec = PolicySpec(distribution="categorical", obs_shape=(3,), action_size=2)
    runs = [0]

    def linear(x, w, b):
        runs[0] += 1
        return tf.matmul(x, w) + b
    sig = [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([3, 2], tf.float32),
           tf.TensorSpec([2], tf.float32)]
    fn = tf.function(linear, input_signature=sig, autograph=False, jit_compile=jit_compile)
    variables = [tf.Variable(W), tf.Variable(B)]
    return eager_call.snapshot_policy(fn, variables, spec, "float32"), variables, runs


def test_snapshot_reads_the_weights_once_and_checks_each_obs():
    snapshot, (w, b), _ = _linear_snapshot()
    policy = snapshot()
    b.assign([1.0, 1.0])  # after the snapshot: not seen by it, seen by the next one
    np.testing.assert_allclose(policy(X), EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(snapshot()(X), EXPECTED - B + 1.0, rtol=1e-6)
    # float64 observations are cast, as policy_inputs.as_obs does for every policy
    np.testing.assert_allclose(policy(X.astype(np.float64)), EXPECTED, rtol=1e-6)
    with pytest.raises(ValueError, match=r"obs has shape \(2, 4\); expected \[B, 3\]"):
        policy(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"obs\[1, 2\] = nan is not finite"):
        policy(np.where(X == 4.0, np.nan, X))


def test_snapshot_reads_each_variable_with_one_read_op(monkeypatch):
    # read_value() adds its Python and an Identity op to the read; a snapshot, taken once per
    # rollout, runs TensorFlow's ReadVariableOp alone, once per variable.
    ops = []
    real = eager_call._eager_runtime

    def recording():
        runtime = real()
        run = runtime["run"]

        def counted(*args):
            ops.append(args[2])  # TFE_Py_Execute(ctx, device, name, inputs, attrs, n)
            return run(*args)
        return {**runtime, "run": counted}
    monkeypatch.setattr(eager_call, "_eager_runtime", recording)
    snapshot, (w, b), _ = _linear_snapshot()
    policy = snapshot()
    assert ops == ["ReadVariableOp", "ReadVariableOp"]
    b.assign([1.0, 1.0])  # copied on write: the snapshot keeps the value it read
    np.testing.assert_allclose(policy(X), EXPECTED, rtol=1e-6)


def test_snapshot_of_distributed_variables_reads_them_through_read_value():
    # A tf.distribute variable is not a plain ResourceVariable: the snapshot reads it as
    # read_value() does (the replica's copy), and keeps the value it read.
    from pgtwin_core.specs import PolicySpec
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        w, b = tf.Variable(W), tf.Variable(B)
    assert eager_call._variable_reads([w, b]) is None
    fn = tf.function(lambda x, w, b: tf.matmul(x, w) + b, jit_compile=True, autograph=False,
                     input_signature=[tf.TensorSpec([None, 3], tf.float32),
                                      tf.TensorSpec([3, 2], tf.float32),
                                      tf.TensorSpec([2], tf.float32)])
    spec = PolicySpec(distribution="categorical", obs_shape=(3,), action_size=2)
    snapshot = eager_call.snapshot_policy(fn, [w, b], spec, "float32")
    policy = snapshot()
    b.assign([1.0, 1.0])
    np.testing.assert_allclose(policy(X), EXPECTED, rtol=1e-6)
    np.testing.assert_allclose(snapshot()(X), EXPECTED - B + 1.0, rtol=1e-6)


@pytest.mark.parametrize("jit_compile", [True, False], ids=["xla", "plain"])
def test_snapshot_calls_an_xla_function_without_the_call_options(monkeypatch, jit_compile):
    # The options (executor_type, config_proto) steer TensorFlow's function runtime, which
    # an XLA-compiled function does not use; a plain function keeps them, as
    # ConcreteFunction.__call__ passes them.
    passed = []
    real = eager_call._direct_call

    def recording(concrete, executor):
        launch = real(concrete, executor)

        def run(*args):
            passed.append(args[4])  # TFE_Py_Execute(ctx, device, name, inputs, attrs, n)
            return launch.run(*args)
        return dataclasses.replace(launch, run=run)
    monkeypatch.setattr(eager_call, "_direct_call", recording)
    snapshot, _, _ = _linear_snapshot(jit_compile=jit_compile)
    np.testing.assert_allclose(snapshot()(X), EXPECTED, rtol=1e-6)
    names = set(passed[-1][::2])
    assert names == (set() if jit_compile else {"executor_type", "config_proto"}), passed[-1]


def test_snapshot_keeps_one_input_per_batch_shape():
    snapshot, _, runs = _linear_snapshot()
    policy = snapshot()
    row = X[:1]  # another batch size between two of the first: each reads its own obs
    for scale in (1.0, -2.0, 0.5):
        np.testing.assert_allclose(policy(scale * X), scale * EXPECTED + (1 - scale) * B, rtol=1e-5)
        np.testing.assert_allclose(policy(scale * row), scale * EXPECTED[:1] + (1 - scale) * B,
                                   rtol=1e-5)
    assert runs[0] == 1  # one trace for every batch size


def _forwarding_launch(monkeypatch):
    """Has every direct call return an output whose numpy view is the input slot's buffer
    itself, as a TensorFlow that forwarded the input's memory would. This one never does:
    even the slot tensor's own ``.numpy()`` is a copy."""
    buffers = {}
    make = eager_call.InputSlots._make.__func__

    def recording(cls, shape, dtype):
        slot = make(cls, shape, dtype)
        buffers[id(slot[1])] = slot[0]
        return slot

    class Forwarded:
        def __init__(self, tensor):
            self.tensor = tensor

        def numpy(self):
            return buffers[id(self.tensor)]
    real = eager_call._direct_call

    def forwarding(concrete, executor):
        return dataclasses.replace(real(concrete, executor),
                                   run=lambda *args: [Forwarded(args[3][0])])
    monkeypatch.setattr(eager_call.InputSlots, "_make", classmethod(recording))
    monkeypatch.setattr(eager_call, "_direct_call", forwarding)


def test_policies_copy_an_output_that_shares_the_slots_memory(monkeypatch):
    _forwarding_launch(monkeypatch)
    from pgtwin_core.specs import PolicySpec
    spec = PolicySpec(distribution="categorical", obs_shape=(3,), action_size=3)
    identity = tf.function(tf.identity, input_signature=[tf.TensorSpec([None, 3])],
                           autograph=False)
    for same in (eager_call.snapshot_policy(identity, [], spec, "float32")(),
                 eager_call.policy_callable(identity)):
        kept = same(X)
        np.testing.assert_array_equal(same(np.zeros_like(X)), 0.0)
        np.testing.assert_array_equal(kept, X)  # a copy, not a view of the slot


def test_snapshot_taken_while_functions_run_eagerly_runs_the_python_body():
    snapshot, _, runs = _linear_snapshot(jit_compile=False)
    snapshot()(X)  # traces once
    traced_runs = runs[0]
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        policy = snapshot()
        out = policy(X)
        policy(X)
    finally:
        tf.config.run_functions_eagerly(before)
    assert runs[0] == traced_runs + 2  # op by op, on every call, as the switch promises
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-6)


def test_snapshot_called_from_threads_at_once_keeps_each_threads_input():
    # The first caller keeps its input list; pgtwin_core.parallel_rollout's other threads
    # use their own slots. Every thread checks each output against numpy.
    snapshot, _, _ = _linear_snapshot()
    policy = snapshot()
    policy(X)  # the main thread owns the kept input list
    errors = []

    def worker(scale: float):
        for _ in range(200):
            out = policy(scale * X)
            if not np.allclose(out, scale * EXPECTED + (1 - scale) * B, rtol=1e-5):
                errors.append((scale, out))
    threads = [threading.Thread(target=worker, args=(s,)) for s in (-3.0, 0.5)]
    for t in threads:
        t.start()
    worker(1.0)
    worker(2.0)
    for t in threads:
        t.join()
    assert not errors, errors[:1]


# ------------------------------------------------- the eager twin's rollout policy
def numpy_mlp_params(spec, weights: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """The categorical MLP's logits in float64 numpy: tanh(x W_i + b_i) per hidden layer,
    then x W_head + b_head (the oracle for the compiled forward pass)."""
    x = obs.astype(np.float64)
    for i in range(len(spec.hidden)):
        x = np.tanh(x @ weights[f"policy/dense_{i}/kernel"] + weights[f"policy/dense_{i}/bias"])
    return x @ weights["policy/head/kernel"] + weights["policy/head/bias"]


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_eager_rollout_policy_is_the_compiled_forward_pass(dtype, rtol):
    from eager.agent import ReinforceAgent
    from pgtwin.parity.twin_parity import POLICY_KINDS
    from pgtwin_core.config import ReinforceConfig
    from pgtwin_core.specs import init_weights

    spec = POLICY_KINDS["categorical_mlp"].spec()
    weights = init_weights(spec, 0, dtype=dtype)
    obs = np.random.default_rng(1).standard_normal((64, *spec.obs_shape)).astype(dtype)
    agent = ReinforceAgent(spec, ReinforceConfig(dtype=dtype), weights=weights)
    plain = ReinforceAgent(spec, ReinforceConfig(dtype=dtype, jit_compile=False), weights=weights)
    try:
        policy = agent.rollout_policy()
        expected = numpy_mlp_params(spec, {k: v.astype(np.float64) for k, v in weights.items()}, obs)
        for _ in range(3):  # the slot is reused: every call reads this call's obs
            np.testing.assert_allclose(policy(obs), expected, rtol=rtol, atol=rtol)
            np.testing.assert_allclose(policy(obs[::-1]), expected[::-1], rtol=rtol, atol=rtol)
        assert agent.trace_counts()["rollout_params"] == 1
        # Without XLA the rollout calls dist_params' own trace: bit for bit the same.
        assert "rollout_params" not in plain.trace_counts()
        np.testing.assert_array_equal(plain.rollout_policy()(obs), plain.dist_params(obs))
    finally:
        agent.close()
        plain.close()


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("float64", 1e-12)])
def test_eager_rollout_policy_is_a_snapshot_of_the_weights_when_taken(dtype, rtol):
    # The compiled rollout policy reads the weights once, when rollout_policy() is called:
    # after an update (and after set_weights) the old policy still gives the old weights'
    # params (TensorFlow copies a variable on write while a read of it lives) and a new one
    # the new weights'. Oracle: numpy_mlp_params on get_weights() at each point.
    from eager.agent import ReinforceAgent
    from pgtwin.parity.twin_parity import POLICY_KINDS
    from pgtwin_core.config import ReinforceConfig
    from pgtwin_core.envs import make_vec_env
    from pgtwin_core.rollout import collect
    from pgtwin_core.specs import init_weights

    kind = POLICY_KINDS["categorical_mlp"]
    spec = kind.spec()
    agent = ReinforceAgent(spec, ReinforceConfig(dtype=dtype, num_envs=4, num_steps=16,
                                                 learning_rate=0.1),
                           weights=init_weights(spec, 0, dtype=dtype))
    envs = make_vec_env(kind.env_id, 4, seed=0)
    obs = np.random.default_rng(2).standard_normal((4, *spec.obs_shape)).astype(dtype)
    as64 = lambda w: {k: v.astype(np.float64) for k, v in w.items()}  # noqa: E731
    try:
        before = agent.get_weights()
        old = agent.rollout_policy()
        batch, _ = collect(envs, old, spec, 16, np.random.default_rng(0))
        assert agent.update(batch)["applied"]
        after = agent.get_weights()
        assert not np.allclose(after["policy/head/kernel"], before["policy/head/kernel"])
        np.testing.assert_allclose(old(obs), numpy_mlp_params(spec, as64(before), obs),
                                   rtol=rtol, atol=rtol)
        np.testing.assert_allclose(agent.rollout_policy()(obs),
                                   numpy_mlp_params(spec, as64(after), obs), rtol=rtol, atol=rtol)
        np.testing.assert_allclose(agent.rollout_params(obs),
                                   numpy_mlp_params(spec, as64(after), obs), rtol=rtol, atol=rtol)
        agent.set_weights(before)
        np.testing.assert_allclose(agent.rollout_policy()(obs),
                                   numpy_mlp_params(spec, as64(before), obs), rtol=rtol, atol=rtol)
    finally:
        envs.close()
        agent.close()
