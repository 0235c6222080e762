"""The episodic optimal baselines in TF2: one XLA computation per update. Mirrors
``legacy_graph/episodic_path.py``.

The math is ``pgtwin.mode_agnostic.episodic_baselines`` on the grid of
``pgtwin_core.baselines.episode_layout``; this twin's own part is how it runs: a
``GradientTape`` around the forward pass over the grid's cells, the estimate and the guarded
optimizer step (``guarded_apply``) as one ``tf.function(jit_compile=True)`` (compiled once per
grid shape; the shapes are bucketed), and an outer ``tf.function`` (one trace: every dimension
dynamic) that reads the memory variables, runs that computation, and assigns the new memory
when the step was applied. For ``optimal_time`` that function also checks the rows and horizon
the grid was laid out for against the variables (``rows_held``: the step is not applied where
they differ) and reports what the variables hold after it (``rows_after``), so that the next
update need not read them (``HeldMemory.held_rows``). The memory variables
(``MemoryVariables``) are the agent's: its ``tf.train.Checkpoint`` saves them
(``LayoutPath.checkpointed``).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.baseline_memory import HeldMemory
from pgtwin_core.baselines.layout_path import LayoutPath

from pgtwin.mode_agnostic.episodic_baselines import (MemoryTensors, assign_memory,
                                                     estimate_from_args, memory_from_list,
                                                     memory_list, memory_rows,
                                                     memory_variables, read_memory,
                                                     rows_after, rows_held)

from eager.gradient_step import guarded_apply
from eager.per_sample import scored_deltas
from eager.policy_call import direct_callable
from eager.tracing import batch_signatures



class MemoryVariables(tf.Module):
    """The episodic baseline's memory (``pgtwin_core/baseline_memory.py``) as variables:
    ``baseline_memory/num``, ``den``, ``sum_r``, ``count`` (and ``horizon`` for
    ``optimal_time``, whose sums have a dynamic number of rows)."""

    def __init__(self, memory: HeldMemory, dtype: str):
        super().__init__(name="baseline_memory")
        with tf.name_scope("baseline_memory/"):
            self.vars = memory_variables(memory.kind, memory.width, memory.empty(), dtype)

    def tensors(self) -> MemoryTensors:
        return read_memory(self.vars)

    def assign(self, new: MemoryTensors) -> tf.Operation:
        return assign_memory(self.vars, new)


def episodic_path(agent) -> LayoutPath:
    """The ``UpdatePath`` of ``agent.config.baseline`` (an episodic one), on ``agent``'s
    variables and optimizer; adds the memory variables to ``agent.checkpoint``."""
    return _Computation(agent).path


class _Computation:
    """The traced functions of one agent's episodic update."""

    def __init__(self, agent):
        spec, config = agent.spec, agent.config
        self.spec, self.config = spec, config
        self.variables, self.optimizer = agent.variables, agent.optimizer
        width = sum(int(np.prod(s, dtype=np.int64)) for s in spec.weight_shapes().values())
        memory = HeldMemory(config.baseline_memory, config.baseline, width, self._read,
                            self._write, self._read_rows)
        self.memory_vars = MemoryVariables(memory, config.dtype)
        s = batch_signatures(spec, config.dtype)
        dt = config.dtype
        grid = tf.TensorSpec([None, None], dt)
        scalar = tf.TensorSpec([], dt)
        sig = [s["obs"], s["actions"], grid, tf.TensorSpec([None], tf.int32), s["vector"], grid,
               scalar, scalar, scalar, tf.TensorSpec([], tf.int32)]
        self.estimate_fn = tf.function(self._estimate, autograph=False,
                                       jit_compile=config.jit_compile)
        # The update's estimate and optimizer step as one XLA computation: one launch an
        # update instead of two, and the gradient's norm inside it (docs/benchmarks.md
        # section 6 measures the difference). The memory's assignment stays outside XLA
        # (optimal_time's sums change their number of rows).
        self.step_fn = tf.function(self._step, autograph=False, jit_compile=config.jit_compile)
        record = [tf.TensorSpec([], tf.int32)] * 2  # the memory's rows and horizon
        self.train_fn = tf.function(self._train, input_signature=sig + record, autograph=False)
        self.grads_fn = tf.function(self._grads, input_signature=sig, autograph=False)
        calls = {}

        def call(key, fn):
            def run(*args):
                if key not in calls:
                    calls[key] = direct_callable(fn)
                return calls[key](*args)
            return run

        train, grads = call("train", self.train_fn), call("grads", self.grads_fn)
        self.path = LayoutPath(config, spec, agent.dist_params, memory, list(self.variables),
                               train=train, estimate=lambda *a: _split(grads(*a)))
        # The agent's tf.train.Checkpoint takes these along (eager/agent.py).
        self.path.checkpointed = {"baseline_memory": self.memory_vars}

    # ------------------------------------------------------------- memory I/O
    def _read(self) -> dict[str, np.ndarray]:
        return {f: v.numpy() for f, v in self.memory_vars.vars.items()}

    def _read_rows(self) -> tuple[int, int]:
        shape, horizon = memory_rows(self.memory_vars.vars)
        return int(shape.numpy()[0]), int(horizon.numpy())

    def _write(self, values: dict[str, np.ndarray]) -> None:
        for f, v in self.memory_vars.vars.items():
            v.assign(np.asarray(values[f], v.dtype.as_numpy_dtype))

    # --------------------------------------------------------- traced bodies
    def _estimate(self, obs, actions, mask, chunk_episode, returns, ar, num_episodes,
                  num_steps, scale, horizon, *memory):
        """``(loss, grads, entropy, baseline, new memory..., finite)`` (XLA-compiled)."""
        spec = self.spec
        weights = tf.reshape(mask, [-1]) / num_steps
        traced, _, entropies, bonus = scored_deltas(spec, self.variables, obs, actions, weights,
                                                    self.config.entropy_coef)
        out = estimate_from_args(spec, self.config, traced, entropies,
                                 (mask, chunk_episode, returns, ar, num_episodes, num_steps,
                                  scale, horizon), memory)
        grads = out.grads
        if bonus is not None:
            grads = [g + e for g, e in zip(grads, bonus)]
        new = memory_list(out.memory)
        return out.loss, grads, out.entropy, out.baseline, new, out.sums_finite

    def _memory_args(self) -> list[tf.Tensor]:
        return memory_list(self.memory_vars.tensors())

    def _grads(self, *args):
        loss, grads, _, _, _, _ = self.estimate_fn(*args, *self._memory_args())
        return [loss, *grads]

    def _step(self, held, *args):
        """The estimate, then the optimizer step guarded by ``held`` (``rows_held``) and
        finiteness: ``(loss, norm of the unclipped gradient, entropy, applied, baseline, new
        memory..., finite)`` (XLA-compiled)."""
        loss, grads, entropy, baseline, new, finite = self._estimate(*args)
        applied = guarded_apply(self.optimizer, self.variables, grads, loss,
                                self.config.max_grad_norm, allowed=held)
        return loss, tf.linalg.global_norm(grads), entropy, applied, baseline, new, finite

    def _train(self, *args):
        """``LayoutPath``'s ``train``: the grid's arguments, then the memory's recorded rows
        and horizon."""
        grid, (rows, horizon) = args[:-2], args[-2:]
        memory = self.memory_vars.tensors()
        held = rows_held(memory, rows, horizon)
        loss, norm, entropy, applied, baseline, new, finite = self.step_fn(
            held, *grid, *memory_list(memory))
        new, assigned = memory_from_list(new), tf.constant(False)
        if self.config.baseline_memory > 0:  # decay 0 keeps nothing: the memory stays empty
            assigned = tf.logical_and(applied, finite)
            tf.cond(assigned, lambda: self._assigned(new), lambda: tf.constant(False))
        return (loss, norm, entropy, applied, baseline, held,
                *rows_after(memory, new, assigned))

    def _assigned(self, new: MemoryTensors) -> tf.Tensor:
        with tf.control_dependencies([self.memory_vars.assign(new)]):
            return tf.constant(True)


def _split(outputs) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """``[loss, *grads]`` -> ``(loss, grads)``."""
    return outputs[0], list(outputs[1:])
