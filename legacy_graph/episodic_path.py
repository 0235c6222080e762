"""The episodic optimal baselines as TF1 graph ops: one XLA computation per update. Mirrors
``eager/episodic_path.py``.

The math is ``pgtwin.mode_agnostic.episodic_baselines`` on the grid of
``pgtwin_core.baselines.episode_layout``; this twin's own part is how it runs: placeholders for
the grid, one ``tf.gradients`` backward pass over its cells (``per_sample.layer_deltas``), the
estimate and the guarded optimizer step built by ``xla_compiled`` (one compiled function
called in the graph, compiled once per grid shape, as the eager twin's ``jit_compile`` step),
then the memory's assignment under ``tf.cond(applied)`` as plain graph ops (``optimal_time``'s
sums change their number of rows), all in one Session call: the step inside the compiled
function is the faster of the two places (docs/benchmarks.md section 6). ``gradients`` and
``loss_value`` run a second compiled function, the estimate alone, built on their first
call. Without ``jit_compile`` the same ops run as plain graph ops. For ``optimal_time``
the step is also guarded by the check of the rows and horizon the grid was laid out for
(``rows_held``), and the call reports what the variables hold after it (``rows_after``), so
that the next update need not read them (``HeldMemory.held_rows``). The memory variables
(``baseline_memory/num`` ...) live in the agent's graph; the agent's ``Saver`` saves them.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pgtwin_core.baseline_memory import HeldMemory
from pgtwin_core.baselines.layout_path import LayoutPath

from pgtwin.mode_agnostic import distributions
from pgtwin.mode_agnostic.episodic_baselines import (MemoryTensors, assign_memory,
                                                     estimate_from_args, memory_from_list,
                                                     memory_list, memory_rows,
                                                     memory_variables, read_memory,
                                                     rows_after, rows_held)

from legacy_graph.gradient_step import checked_gradients, guarded_apply
from legacy_graph.per_sample import layer_deltas, xla_compiled
from legacy_graph.policy_call import direct_callable

tf1 = tf.compat.v1

MEMORY_SCOPE = "baseline_memory"
"""The memory variables' name scope (``legacy_graph/checkpoint_layout.py`` leaves them out
of the policy's layout)."""


class MemoryVariables:
    """The episodic baseline's memory as graph variables (mirrors the eager twin's tf.Module):
    ``baseline_memory/num``, ``den``, ``sum_r``, ``count`` (and ``horizon`` for
    ``optimal_time``, whose sums have a dynamic number of rows)."""

    def __init__(self, memory: HeldMemory, dtype: str):
        with tf1.name_scope(f"{MEMORY_SCOPE}/"):
            self.vars = memory_variables(memory.kind, memory.width, memory.empty(), dtype)
            self.placeholders = {f: tf1.placeholder(v.dtype, v.shape, name=f"{f}_value")
                                 for f, v in self.vars.items()}
            self.load_op = tf.group(*[v.assign(self.placeholders[f])
                                      for f, v in self.vars.items()])

    def tensors(self) -> MemoryTensors:
        return read_memory(self.vars)

    def assign(self, new: MemoryTensors) -> tf.Operation:
        return assign_memory(self.vars, new)


def episodic_path(agent) -> LayoutPath:
    """The ``UpdatePath`` of ``agent.config.baseline`` (an episodic one), built in ``agent``'s
    graph on its variables and optimizer. The agent's ``Saver`` must be made after it (it
    saves every global variable)."""
    return _Computation(agent).path


class _Computation:
    """The ops of one agent's episodic update."""

    def __init__(self, agent):
        spec, config = agent.spec, agent.config
        self.spec, self.config, self.variables = spec, config, agent.variables
        self.optimizer = agent.optimizer
        self.session = agent.session
        width = sum(int(np.prod(s, dtype=np.int64)) for s in spec.weight_shapes().values())
        memory = HeldMemory(config.baseline_memory, config.baseline, width, self._read,
                            self._write, self._read_rows)
        dt = config.dtype
        with agent.graph.as_default():
            self.memory_vars = MemoryVariables(memory, dt)
            rows = memory_rows(self.memory_vars.vars) if memory.kind == "time" else None
            with tf1.name_scope("episodic"):
                feeds = [agent.obs_ph, agent.actions_ph,
                         tf1.placeholder(dt, [None, None], name="mask"),
                         tf1.placeholder(tf.int32, [None], name="chunk_episode"),
                         tf1.placeholder(dt, [None], name="returns"),
                         tf1.placeholder(dt, [None, None], name="discounted_rewards"),
                         tf1.placeholder(dt, [], name="num_episodes"),
                         tf1.placeholder(dt, [], name="num_steps"),
                         tf1.placeholder(dt, [], name="scale"),
                         tf1.placeholder(tf.int32, [], name="horizon")]
                record = [tf1.placeholder(tf.int32, [], name="held_rows"),
                          tf1.placeholder(tf.int32, [], name="held_horizon")]
                read = self.memory_vars.tensors()
                memory_in = memory_list(read)
                held = rows_held(read, *record)
                self._feeds = feeds
                step = self._built(self._step, [held, *feeds, *memory_in], "episodic_step")
                loss, norm, entropy, baseline, finite, applied = step[:6]
                new = memory_from_list(step[6:])
                # Ordered after the step's writes through `applied`, which follows them.
                targets, assigned = [], tf.constant(False)
                if config.baseline_memory > 0:  # decay 0 keeps nothing: the memory stays empty
                    assigned = tf.logical_and(applied, finite)
                    targets.append(tf1.cond(assigned, lambda: self._assigned(new),
                                            lambda: tf.constant(False)))
                metrics = [loss, norm, entropy, applied, baseline, held,
                           *rows_after(read, new, assigned)]
            self._init = tf1.variables_initializer(list(self.memory_vars.vars.values()))
        self.session.run(self._init)
        self._rows_call = (None if rows is None
                           else direct_callable(self.session, list(rows), [], caller_thread=True))
        self.graph, self._estimate_call = agent.graph, None
        train = direct_callable(self.session, metrics, feeds + record, targets=targets)
        self.path = LayoutPath(config, spec, agent.dist_params, memory, list(self.variables),
                               train=train, estimate=self._estimated)

    # ------------------------------------------------------------- memory I/O
    def _read(self) -> dict[str, np.ndarray]:
        return self.session.run(self.memory_vars.vars)

    def _read_rows(self) -> tuple[int, int]:
        shape, horizon = self._rows_call()
        return int(shape[0]), int(horizon)

    def _write(self, values: dict[str, np.ndarray]) -> None:
        mv = self.memory_vars
        self.session.run(mv.load_op, {mv.placeholders[f]: np.asarray(values[f],
                                                                      v.dtype.as_numpy_dtype)
                                      for f, v in mv.vars.items()})

    def _estimated(self, *args) -> tuple[np.ndarray, list[np.ndarray]]:
        """``LayoutPath``'s ``estimate``: ``(loss, grads)`` on the layout's arguments, nothing
        applied: the estimate alone (under XLA its own compiled function), built into the
        graph on first use, since training only updates and would build and compile it for
        nothing."""
        if self._estimate_call is None:
            with self.graph.as_default(), tf1.name_scope("episodic/"):
                inputs = self._feeds + memory_list(self.memory_vars.tensors())
                out = self._built(self._estimate, inputs, "episodic_estimate")
            self._estimate_call = direct_callable(
                self.session, [out[0], *out[4:4 + len(self.variables)]], self._feeds)
        return _split(self._estimate_call(*args))

    # ------------------------------------------------------------------ ops
    def _built(self, body, inputs: list[tf.Tensor], name: str) -> list[tf.Tensor]:
        """``body(*inputs)``: one compiled function ``name`` under ``jit_compile``, else plain
        graph ops."""
        if self.config.jit_compile:
            return xla_compiled(body, inputs, name)
        return body(*inputs)

    def _estimate(self, obs, actions, mask, chunk_episode, returns, ar, num_episodes,
                  num_steps, scale, horizon, *memory) -> list[tf.Tensor]:
        """``[loss, entropy, baseline, finite, *grads, *new memory]`` (one XLA computation)."""
        spec, coef = self.spec, self.config.entropy_coef
        traced = layer_deltas(spec, self.variables, obs, actions)
        entropies = distributions.entropy(spec, traced.params)
        out = estimate_from_args(spec, self.config, traced, entropies,
                                 (mask, chunk_episode, returns, ar, num_episodes, num_steps,
                                  scale, horizon), memory)
        grads = out.grads
        if coef > 0:
            weights = tf.reshape(mask, [-1]) / num_steps
            bonus = checked_gradients(-coef * tf.reduce_sum(weights * entropies), self.variables)
            grads = [g + e for g, e in zip(grads, bonus)]
        new = memory_list(out.memory)
        return [out.loss, out.entropy, out.baseline, out.sums_finite, *grads, *new]

    def _step(self, held, *args) -> list[tf.Tensor]:
        """``[loss, norm of the unclipped gradient, entropy, baseline, finite, applied, *new
        memory]``: the estimate and the optimizer step guarded by ``held`` (``rows_held``) and
        finiteness (one XLA computation under ``jit_compile``); ``applied`` is computed after the
        step's writes, so that fetching it runs them."""
        out = self._estimate(*args)
        loss, entropy, baseline, finite = out[:4]
        n = len(self.variables)
        grads = out[4:4 + n]
        train_op, applied = guarded_apply(self.optimizer, self.variables, grads, loss,
                                          self.config.max_grad_norm, allowed=held)
        with tf.control_dependencies([train_op]):
            applied = tf.identity(applied)
        return [loss, tf.linalg.global_norm(grads), entropy, baseline, finite, applied,
                *out[4 + n:]]

    def _assigned(self, new: MemoryTensors) -> tf.Tensor:
        with tf.control_dependencies([self.memory_vars.assign(new)]):
            return tf.constant(True)


def _split(outputs) -> tuple[np.ndarray, list[np.ndarray]]:
    """``[loss, *grads]`` -> ``(loss, grads)``."""
    return outputs[0], list(outputs[1:])
