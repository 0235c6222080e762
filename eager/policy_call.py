"""Calls into the traced functions on the hot paths: the rollout's policy and the update.

A rollout calls the policy once per env step on a few dozen observations, so the fixed cost
of a call, not its arithmetic, bounds env-steps per second; the update pays the same fixed
cost once per batch. A ``tf.function`` call spends its own time in Python (matching the
arguments to a trace, converting them; docs/benchmarks.md, "Where the time goes") before
TensorFlow runs anything. This module calls the one
traced function directly, as ``ConcreteFunction.__call__`` ends up doing
(``context.call_function``): the function's name, its flat inputs (the arrays, then the
captured variable handles) and the call attributes. No gradient tape records the call.

The policy also runs on the single-threaded executor, i.e. its few tiny ops run in the
caller's thread instead of being handed one by one to the inter-op pool: the same choice the
legacy twin makes with ``RunOptions(inter_op_thread_pool=-1)`` (``legacy_graph/policy_call.py``).
The update keeps the default executor: its guarded apply is a ``tf.cond``, which the
single-threaded executor does not run.

The rollout's policy is the same forward pass XLA-compiled (``rollout_compiled``): a
``jit_compile`` function is run as one compiled op, without the function runtime's
per-call set-up (executor, call frame, rendezvous), which on this machine is most of a
non-compiled call's cost, whatever the ops (docs/benchmarks.md section 5 measures it). Its
observations reach TensorFlow through an input slot (:class:`InputSlots`, every
``policy_callable``): a tensor made once over a numpy buffer that each call writes, since
making a tensor per call cost more, inside a rollout, than the compiled call itself. It
takes the weights as inputs, read once per rollout (:func:`snapshot_policy`, one
``ReadVariableOp`` per variable: :func:`_variable_reads`), not as captured variables read in
every call, and it is called without the call attributes, which only the function runtime
it skips would read (:func:`_without_call_options`).
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import threading
from typing import Callable

import numpy as np
import tensorflow as tf

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.policy_inputs import as_obs
from pgtwin_core.specs import PolicySpec

# Executor that runs a function's ops one after another in the calling thread; it supports
# every op but control flow (Switch/Merge), which the policy's forward pass does not use.
SINGLE_THREADED = "SINGLE_THREADED_EXECUTOR"


def direct_callable(fn: tf.types.experimental.PolymorphicFunction, executor: str = "",
                    ) -> Callable[..., list[tf.Tensor]]:
    """``call(*arrays) -> [tensor, ...]``: ``fn``'s single trace, called without its Python.

    Args:
      fn: a ``tf.function`` with an ``input_signature`` of tensors only. It is traced here,
        once (the same trace later ``fn(...)`` calls use).
      executor: ``""`` (TensorFlow's default executor) or ``SINGLE_THREADED``.

    Returns:
      ``call(*arrays)``: the arrays (numpy, or tensors, passed as they are) in signature
      order, each already of the signature's dtype (validate them first, e.g.
      ``pgtwin_core.policy_inputs``); returns ``fn``'s outputs
      flattened (``tf.nest.flatten`` order). No gradient is recorded. Under
      ``tf.config.run_functions_eagerly(True)`` it calls ``fn`` itself, which then runs its
      Python body op by op, as that switch promises.
    """
    concrete = fn.get_concrete_function()
    direct = _direct_call(concrete, executor)
    tensor = _eager_tensor()

    def call(*arrays: np.ndarray) -> list[tf.Tensor]:
        if tf.config.functions_run_eagerly():
            return tf.nest.flatten(fn(*arrays))
        if direct is not None:
            return direct([a if isinstance(a, tf.Tensor) else tensor(a) for a in arrays])
        # The public path, for a TensorFlow without the pieces ``_direct_call`` uses.
        with tf.experimental.function_executor_type(executor or None):
            return tf.nest.flatten(concrete(*map(tf.convert_to_tensor, arrays)))
    call.concrete = concrete  # the runtime drops the traced function when ``concrete`` goes
    return call


def policy_callable(fn: tf.types.experimental.PolymorphicFunction,
                    executor: str = SINGLE_THREADED) -> Callable[[np.ndarray], np.ndarray]:
    """``call(obs) -> params``, numpy in and out, on ``executor`` (see ``direct_callable``).

    ``fn`` maps observations ``[B, *obs_shape]`` to one tensor; ``obs`` must already have the
    signature's dtype and shape (see ``pgtwin_core.policy_inputs.as_obs``). An XLA-compiled
    ``fn`` runs as one op, so its executor does not matter; pass ``""``.

    The observations reach TensorFlow through an :class:`InputSlots` tensor: copied into
    memory a tensor already shares, instead of a tensor made per call (which, inside a
    rollout, cost more than the XLA-compiled call itself: docs/benchmarks.md section 5).
    The returned array never shares memory with that slot (it is copied if it would).
    """
    call_with = _numpy_call(fn, executor)

    def call(obs: np.ndarray) -> np.ndarray:
        return call_with(obs, [])
    call.concrete = call_with.concrete
    return call


def snapshot_policy(fn: tf.types.experimental.PolymorphicFunction, variables: list[tf.Variable],
                    spec: PolicySpec, dtype: str,
                    ) -> Callable[[], Callable[[np.ndarray], np.ndarray]]:
    """``snapshot() -> call(obs) -> params``: ``fn(as_obs(obs), *weights)`` on the
    ``variables``' values as ``snapshot()`` reads them, numpy in and out (as
    :func:`policy_callable`), ``obs`` checked by ``pgtwin_core.policy_inputs.as_obs``.

    For the rollout: the weights do not change within one, and reading them once per
    rollout instead of once per call (as captured variables are) takes a read per variable
    out of every env step (docs/benchmarks.md section 5). A snapshot is a value: an update
    after ``snapshot()`` leaves it as it was (TensorFlow copies a variable on write while a
    read of it is alive), so a policy must be taken anew for each rollout, as
    ``agent.rollout_policy()`` says. ``fn``'s signature: observations, then one tensor per
    variable, in order.

    A rollout calls the policy once per env step, so what does not change within one is
    settled when the snapshot is taken: the device (the current one then), whether
    functions run eagerly, and, for the thread that makes the first call, the input slot
    and the whole input list. Each piece of Python left in a call measured about half a
    per cent of the eager rollout's env-steps/s (docs/benchmarks.md section 5). Other
    threads (``pgtwin_core.parallel_rollout`` calls one policy from several) use their own
    slots, as :func:`policy_callable` does.

    An XLA-compiled ``fn`` is called without the call options (:func:`_without_call_options`).
    The weights are read by one ``ReadVariableOp`` each (:func:`_variable_reads`): through
    ``read_value()`` the six reads of the CartPole MLP took about a third of a millisecond a
    rollout, a twentieth of the rollout (docs/benchmarks.md section 5, twenty-ninth session).
    """
    public = direct_callable(fn, executor="")
    concrete = fn.get_concrete_function()
    launch = _direct_call(concrete, executor="")
    if launch is not None and _xla_compiled(concrete):
        launch = _without_call_options(launch)
    slots = InputSlots()
    reads = _variable_reads(variables)

    def snapshot() -> Callable[[np.ndarray], np.ndarray]:
        if reads is not None and tf.executing_eagerly():
            weights = [read([])[0] for read in reads]
        else:
            with tf.init_scope():
                weights = [v.read_value() for v in variables]
        if launch is None or tf.config.functions_run_eagerly():
            return lambda obs: public(as_obs(spec, obs, dtype=dtype), *weights)[0].numpy()
        return _bound_call(launch, slots, weights, public, spec, dtype)
    snapshot.concrete = public.concrete
    return snapshot


def _bound_call(launch: _Launch, slots: InputSlots, weights: list[tf.Tensor], public,
                spec: PolicySpec, dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    """One snapshot's ``call(obs)`` (:func:`snapshot_policy`): the launch on the slot's
    tensor, the weights and the captured inputs, with the device of now; the first thread's
    input lists kept per batch shape."""
    run, handle, name, attrs, num_outputs = (launch.run, launch.handle, launch.name,
                                             launch.attrs, launch.num_outputs)
    device, tail = launch.ctx.device_name, [*weights, *launch.captured]
    owner, owned = threading.get_ident(), {}

    def inputs_for(obs: np.ndarray) -> tuple[np.ndarray, list[tf.Tensor]] | None:
        slot = slots.get(obs)
        return None if slot is None else (slot[0], [slot[1], *tail])

    def call(obs: np.ndarray) -> np.ndarray:
        obs = as_obs(spec, obs, dtype=dtype)
        if threading.get_ident() == owner:
            entry = owned.get(obs.shape) or owned.setdefault(obs.shape, inputs_for(obs))
        else:
            entry = inputs_for(obs)
        if entry is None:
            return public(obs, *weights)[0].numpy()
        buffer, inputs = entry
        buffer[...] = obs
        try:
            out = run(handle, device, name, inputs, attrs, num_outputs)[0].numpy()
        except launch.not_ok as err:
            raise launch.to_error(err) from None
        if out.nbytes == buffer.nbytes and np.may_share_memory(out, buffer):
            return out.copy()  # the next call overwrites the slot
        return out
    return call


def _numpy_call(fn: tf.types.experimental.PolymorphicFunction, executor: str,
                ) -> Callable[[np.ndarray, list[tf.Tensor]], np.ndarray]:
    """``call(obs, tensors) -> fn(obs, *tensors)`` as numpy, ``obs`` through an input slot
    (:func:`policy_callable`)."""
    public = direct_callable(fn, executor)
    direct = _direct_call(fn.get_concrete_function(), executor)
    slots = InputSlots()

    def call(obs: np.ndarray, tensors: list[tf.Tensor]) -> np.ndarray:
        slot = None if direct is None or tf.config.functions_run_eagerly() else slots.get(obs)
        if slot is None:
            return public(obs, *tensors)[0].numpy()
        buffer, tensor = slot
        np.copyto(buffer, obs)
        out = direct([tensor, *tensors])[0].numpy()
        return out.copy() if np.may_share_memory(out, buffer) else out
    call.concrete = public.concrete
    return call


class InputSlots(threading.local):
    """Per thread and per input shape and dtype: a numpy buffer and an EagerTensor over its
    memory, so that writing the buffer sets the tensor (one copy, no tensor made per call).

    TensorFlow makes an EagerTensor share a numpy array's memory (no copy) when the array is
    C-contiguous and aligned to ``ALIGN`` bytes; the buffer is allocated so. Each slot is
    checked when made: where the tensor turns out to hold a copy (another TensorFlow),
    :meth:`get` returns None and the caller makes a tensor per call. Per thread, because a
    slot holds one input at a time (``pgtwin_core.parallel_rollout`` calls one policy from
    several threads at once). Callers must finish with a slot's tensor (the call returned
    and its output was read) before they write the buffer again; the eager call here is
    synchronous, so every call does.
    """

    ALIGN = 64
    """Bytes: TensorFlow's CPU tensor alignment (``Allocator::kAllocatorAlignment``)."""
    MAX_SLOTS = 8
    """Shapes kept per thread; past that the slots are dropped and made again as needed."""

    def __init__(self):
        super().__init__()
        self._slots: dict[tuple, tuple[np.ndarray, tf.Tensor] | None] = {}

    def get(self, like: np.ndarray) -> tuple[np.ndarray, tf.Tensor] | None:
        """``(buffer, tensor)`` of ``like``'s shape and dtype, or None (no shared memory)."""
        key = (like.shape, like.dtype)
        try:
            return self._slots[key]
        except KeyError:
            if len(self._slots) >= self.MAX_SLOTS:
                self._slots.clear()
            slot = self._slots[key] = self._make(like.shape, like.dtype)
            return slot

    @classmethod
    def _make(cls, shape: tuple[int, ...], dtype: np.dtype):
        size = int(np.prod(shape)) * dtype.itemsize
        raw = np.empty(size + cls.ALIGN, np.uint8)
        start = -raw.ctypes.data % cls.ALIGN
        buffer = raw[start:start + size].view(dtype).reshape(shape)
        buffer.fill(0)
        tensor = _eager_tensor()(buffer)
        if buffer.size == 0:
            return None
        buffer.flat[0] = 1  # visible through the tensor only if it shares the memory
        return (buffer, tensor) if tensor.numpy().flat[0] == 1 else None


def _eager_tensor() -> Callable[[np.ndarray], tf.Tensor]:
    """``array -> EagerTensor`` of the array's dtype (no cast: an array of another dtype than
    a signature's is refused by the call), on the current device: what ``tf.constant`` ends
    in, without its Python layers; ``tf.constant`` on a TensorFlow without them."""
    try:
        from tensorflow.python.eager import context
        from tensorflow.python.framework import ops
        ctx = context.context()
        ctx.ensure_initialized()
        tensor = ops.EagerTensor
    except (ImportError, AttributeError):
        return tf.constant
    return lambda array: tensor(array, ctx.device_name)


def rollout_compiled(spec: PolicySpec, config: ReinforceConfig) -> bool:
    """Whether the rollout calls an XLA-compiled forward pass (``config.jit_compile``, MLP).

    XLA compiles once per batch shape, and a rollout has one (``[N, *obs_shape]``), so the
    compile is paid once per run: ~0.05-0.1 s for an MLP. The unrolled LSTM's took ~0.8 s
    per shape here, more than a short run wins back, so it keeps the plain trace. The
    compiled forward pass is not bit-identical to the plain one (XLA fuses and orders the
    arithmetic its own way: within a few ulps, docs/benchmarks.md section 5); the agents'
    ``dist_params`` keeps the plain trace, the one the parity ladder compares exactly.
    """
    return config.jit_compile and spec.torso != "lstm"


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What ``TFE_Py_Execute`` needs to run one traced function, read once: the context and
    its handle, the function's name, the call attributes, the captured inputs (after the
    signature's) and the number of outputs; with the status exception it raises and the
    conversion to a ``tf.errors`` exception that ``execute.execute`` applies."""

    run: Callable
    ctx: object
    handle: object
    name: str
    attrs: tuple
    captured: list
    num_outputs: int
    not_ok: type
    to_error: Callable

    def __call__(self, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
        """The function on ``tensors`` (signature order), on the current device."""
        try:
            return self.run(self.handle, self.ctx.device_name, self.name,
                            tensors + self.captured, self.attrs, self.num_outputs)
        except self.not_ok as err:  # as execute.execute raises it: a tf.errors exception
            raise self.to_error(err) from None


def _xla_compiled(concrete) -> bool:
    """Whether the traced function ``concrete`` is XLA-compiled (``jit_compile=True``)."""
    attr = concrete.function_def.attr
    return "_XlaMustCompile" in attr and attr["_XlaMustCompile"].b


def _without_call_options(launch: _Launch) -> _Launch:
    """``launch`` without the call attributes (``executor_type``, ``config_proto``).

    They are the options a function call passes to TensorFlow's function runtime: which
    executor runs the function's ops, and the session config its graph is optimised with.
    An XLA-compiled function runs as one compiled op, on neither, so they change nothing
    it computes. Each one costs every eager call a lookup of the function's name among the
    registered ops, which fails (a function is not an op) and builds an error status
    whose message holds the host name (a ``uname`` system call); in a rollout that is
    measurable (docs/benchmarks.md section 5, twenty-eighth session).
    """
    return dataclasses.replace(launch, attrs=())


def _direct_call(concrete, executor: str) -> _Launch | None:
    """``launch(tensors)``: ``concrete``'s traced function on its inputs (in signature
    order), called as ``context.call_function`` does, through what ``execute.execute`` ends
    in (the context's handle read once, not per call; its error handling kept); or None
    if this TensorFlow lacks the pieces (then the caller uses the public, slower path)."""
    runtime = _eager_runtime()
    try:
        name = concrete._inference_function.name  # noqa: SLF001
    except AttributeError:
        return None
    if runtime is None:
        return None
    name = name.decode() if isinstance(name, bytes) else name
    options = copy.copy(runtime["ctx"].function_call_options)
    options.executor_type = executor
    return _Launch(name=name, attrs=tuple(itertools.chain(*options.as_attrs().items())),
                   captured=list(concrete.captured_inputs), num_outputs=len(concrete.outputs),
                   **runtime)


def _variable_reads(variables: list[tf.Variable]) -> list[_Launch] | None:
    """Per variable, a launch of TensorFlow's ``ReadVariableOp`` on its handle: the read
    ``read_value()`` makes, without its Python (``init_scope``, the name scope, the tape's
    bookkeeping) and without the ``Identity`` op it adds. The value shares the variable's
    buffer as ``read_value()``'s does, so an update copies on write as before. None where
    a variable is not a plain ``ResourceVariable`` (a ``tf.distribute`` one reads its
    replica's copy through its own Python) or this TensorFlow lacks the pieces; the caller
    then reads through ``read_value()``."""
    from tensorflow.python.ops import resource_variable_ops
    runtime = _eager_runtime()
    if runtime is None or not all(isinstance(v, resource_variable_ops.ResourceVariable)
                                  for v in variables):
        return None
    return [_Launch(name="ReadVariableOp", attrs=("dtype", v.dtype.as_datatype_enum),
                    captured=[v.handle], num_outputs=1, **runtime) for v in variables]


def _eager_runtime() -> dict | None:
    """What every :class:`_Launch` shares (``run``, ``ctx``, ``handle``, ``not_ok``,
    ``to_error``), or None if this TensorFlow lacks the pieces."""
    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import context, core
        ctx = context.context()
        ctx.ensure_initialized()
        return dict(run=pywrap_tfe.TFE_Py_Execute, ctx=ctx, handle=ctx._handle,  # noqa: SLF001
                    not_ok=core._NotOkStatusException,  # noqa: SLF001
                    to_error=core._status_to_exception)  # noqa: SLF001
    except (ImportError, AttributeError):
        return None
