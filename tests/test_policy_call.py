"""The hot-path calls of both twins (``*/policy_call.py``) compute what the public calls do.

Expected values come from numpy on the same inputs (``x @ W + b``, sums), never from the
call under test; the eager ``run_functions_eagerly`` switch and variable updates between
calls are checked through side effects a wrong implementation would miss.
"""
from __future__ import annotations

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
