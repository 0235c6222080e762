"""The user's TF1 program, built and run by the harness as the user wrote it.

:class:`TF1Side` builds a :class:`pgtwin.parity.programs.TF1Program` in a ``tf.Graph`` of its own
(eager execution stays on for the rest of the process), with TF1's variable semantics
where old code needs them (:func:`tf1_variables`: ``tf.train.get_global_step()`` finds
``tf.Variable(0, name="global_step")``; ref variables on request). It feeds numpy
inputs cast to each placeholder's *declared* dtype, as ``feed_dict`` does, and refuses a
value that the cast would change (a float action 0.5 into an int placeholder) by name.
The harness's own Session runs the user's loss, ``tf.gradients`` of it and, for the
weights rung, the user's ``train_op``.
"""
from __future__ import annotations

import contextlib
import inspect
import random
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from pgtwin.parity.accumulators import accumulator_message, accumulators
from pgtwin.parity.code_checks import (LegacyCodeError, eager_guard, explain_build_error,
                                       program_failed, require_eager)
from pgtwin.parity.fed_gradients import fed_gradients
from pgtwin.parity.feed_cuts import cut_off_message
from pgtwin.parity.graph_walk import ASSIGN_OPS, upstream_ops
from pgtwin.parity.index_ranges import check_fed_indices
from pgtwin.parity.local_copies import local_copies
from pgtwin.parity.model_state import state_kept, tf1_state_variables, variable_ops
from pgtwin.parity.optimizer_config import (apply_kind, gradient_input, tf1_adam_moments,
                                            tf1_clip_thresholds, tf1_optimizer,
                                            tf1_settings_by_variable, tf1_stepped)
from pgtwin.parity.programs import TF1Program, resolve
from pgtwin.parity.tf_patches import replaced, slim_names
from pgtwin.parity.variable_mapping import VariableInfo

tf1 = tf.compat.v1

#: The harness graph's seed, before the user's code runs (which may set its own).
GRAPH_SEED = 0


@contextlib.contextmanager
def python_random_seeded(seed: int) -> Iterator[None]:
    """Python's ``random`` module seeded with ``seed`` inside, its state restored after.

    The graph seed does not reach every initializer: ``tf_keras``' legacy layers
    (``tf.compat.v1.layers.dense`` under ``TF_USE_LEGACY_KERAS=1``) draw their default
    initializer's seed from ``random``, so without this each run of the same comparison
    started TF1 from other weights (and its hints, which read the values, came and went)."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


@contextlib.contextmanager
def _named_feeds() -> Iterator[None]:
    """A Session run that misses a placeholder raises :class:`FeedError` naming it and the
    fix, not TensorFlow's InvalidArgumentError."""
    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        if "must feed a value for placeholder" not in str(err):
            raise
        name = str(err).split("placeholder tensor '")[-1].split("'")[0]
        raise FeedError(f"the TF1 graph needs placeholder {name!r}, which TF1Program.feeds "
                        f"does not name: add feeds={{..., 'KEY': {name!r}}} and an input "
                        "array KEY") from None


def _default_value(op: tf.Operation) -> Any:
    """A ``placeholder_with_default``'s default, where it is a constant, else '?'."""
    value = tf.get_static_value(op.inputs[0])
    return "?" if value is None else value.tolist()


class FeedError(ValueError):
    """An input that cannot be fed to its placeholder as ``feed_dict`` would."""


@contextlib.contextmanager
def tf1_variables(ref: bool = False) -> Iterator[None]:
    """TF1 variable semantics for the code built inside (graph mode only).

    * ``tf.train.get_global_step()`` also finds a ``tf.Variable(0, name="global_step")``
      made by hand, as TF 1.x did (TF2's resource variables make ``global_step:0`` a
      resource handle, which it refuses with "does not have integer type");
    * ``ref``: TF1's ref variables instead of resource ones. Their reads alias the buffer
      that a ``train_op`` updates in place, so gradients read half-updated weights and
      parity after a step is not exact; use it only for code that needs refs.

    Eager code always makes resource variables, so the rest of the process is unaffected;
    the previous setting is restored on exit.
    """
    was = tf1.resource_variables_enabled()
    if ref:
        tf1.disable_resource_variables()
    try:
        with replaced("train.get_global_step", _finding_hand_made_step):
            yield
    finally:
        (tf1.enable_resource_variables if was else tf1.disable_resource_variables)()


def _finding_hand_made_step(original: Any) -> Any:
    """``get_global_step`` that also finds an integer top-level ``global_step`` variable."""
    def get_global_step(graph: Any = None) -> Any:
        graph = graph or tf1.get_default_graph()
        if not graph.get_collection(tf1.GraphKeys.GLOBAL_STEP):
            for v in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES):
                if v.op.name == "global_step" and v.dtype.base_dtype.is_integer:
                    return v
        return original(graph)
    return get_global_step


def cast_feed(key: str, value: Any, placeholder: tf.Tensor) -> np.ndarray:
    """``value`` as ``feed_dict`` would feed it to ``placeholder``, or a :class:`FeedError`.

    Floats become the placeholder's float dtype (float64 returns into a float32
    placeholder), integers its integer dtype. Refused, naming the input, the placeholder
    and both dtypes: non-integral floats into an integer placeholder, integers out of its
    range, non-numeric values, and shapes the placeholder does not accept.
    """
    array = np.asarray(value)
    target = placeholder.dtype.base_dtype
    fed = "placeholder" if placeholder.op.type.startswith("Placeholder") else \
        f"fed tensor ({placeholder.op.type})"
    where = f"inputs[{key!r}] ({array.dtype}, shape {array.shape}) for {fed} " \
            f"{placeholder.op.name!r} ({target.name}, shape {placeholder.shape})"
    if not placeholder.shape.is_compatible_with(array.shape):
        raise FeedError(f"{where}: the shapes do not fit; give an array of shape "
                        f"{placeholder.shape} (None: any size)")
    if array.dtype.kind not in "biuf":
        raise FeedError(f"{where}: not a numeric array")
    np_target = target.as_numpy_dtype
    if target.is_integer:
        if array.dtype.kind == "f":
            bad = ~np.isfinite(array) | (array != np.round(array))
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0])
                raise FeedError(f"{where}: value {array[index].item()} at index {index} is not an "
                                f"integer, and casting to {target.name} would change it")
        info = np.iinfo(np_target)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise FeedError(f"{where}: values outside {target.name}'s range "
                            f"[{info.min}, {info.max}]")
    elif target.is_floating and array.size and not np.all(np.isfinite(array)):
        raise FeedError(f"{where}: holds non-finite values")
    elif not (target.is_floating or target.is_integer or target == tf.bool):
        raise FeedError(f"{where}: pgtwin feeds numeric placeholders only")
    return array.astype(np_target)


TOWERS = (". A feed names one placeholder: where towers each take a part of the batch "
          "(tower_0/obs, tower_1/obs), save the parts as inputs of their own (obs_0, obs_1), "
          "feed each tower's placeholder from its part, and join them on the TF2 side "
          "(tf.concat([b['obs_0'], b['obs_1']], 0)), which gets every input")
"""Added where a feed names a list of placeholders (a model built once per tower)."""


def _tensor(value: Any, what: str, obj: Any = None) -> tf.Tensor:
    """``value`` as a tensor of the TF1 graph (a variable's value), else a ``TypeError``
    that says what it is and names the tensors ``obj`` (the built object) holds."""
    if isinstance(value, tf.Variable):
        return value.value() if hasattr(value, "value") else tf.convert_to_tensor(value)
    if not isinstance(value, tf.Tensor):
        kind = ("a method" if inspect.ismethod(value) else "a function"
                if inspect.isroutine(value) else f"a {type(value).__name__}")
        name = getattr(value, "__qualname__", "")
        held = sorted(a for a, v in getattr(obj, "__dict__", {}).items()
                      if isinstance(v, (tf.Tensor, tf.Variable)))
        towers = isinstance(value, (list, tuple)) and ".feeds[" in what and value and all(
            isinstance(v, (tf.Tensor, str)) for v in value)
        raise TypeError(f"{what} is {kind}{f' ({name})' if name else ''}, not a tensor of "
                        "the TF1 graph: name a tensor (an attribute holding one, or a graph "
                        "name such as 'name:0')"
                        + (f"; the built object's tensors: {held[:30]}" if held else "")
                        + (TOWERS if towers else ""))
    return value


def op_by_op_config() -> Any:
    """A Session config that runs the graph op by op as written, as eager code runs it:
    Grappler's arithmetic rewrites (which reorder and merge float ops: SAC's actor gradient
    moved by 4e-3 relative) and its op fusions (a matmul, bias and activation in one
    kernel) off. The user's own Session keeps its config; only the comparison's changes."""
    config = tf1.ConfigProto()
    rewrites = config.graph_options.rewrite_options
    rewrites.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
    rewrites.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


PROCEDURE = (". A train step your code makes in Python, running sess.run itself (TRPO's "
             "conjugate gradient and line search), is no op: a function given as train_op is "
             "called once, at set-up, to build ops in the graph, and must return them. Compare "
             "the outputs, loss and gradients with steps=0 (--steps 0), or wrap the procedure "
             "in an op (tf.compat.v1.py_func running it on your Session, then returning) to "
             "step it")
"""Added where ``train_op`` resolved to a function or to None (a procedure that ran)."""


def train_op_of(value: Any, what: str, graph: tf.Graph) -> tf.Operation:
    """The op to run for the user's ``train_op``: an op, a tensor's op, or a list or tuple
    of them (an actor's and a critic's ``minimize``, as ``sess.run([a, c])`` runs them)
    grouped into one; else a :class:`TypeError` naming what was found and where."""
    if isinstance(value, (list, tuple)):
        ops = [train_op_of(v, f"{what}[{i}]", graph) for i, v in enumerate(value)]
        if not ops:
            raise TypeError(f"{what} is an empty {type(value).__name__}: name the op your "
                            "code runs to train (optimizer.minimize(...), or a list of them)")
        with graph.as_default():
            return ops[0] if len(ops) == 1 else tf.group(*ops)
    op = value.op if isinstance(value, (tf.Tensor, tf.Variable)) else value
    if not isinstance(op, tf.Operation):
        procedure = value is None or callable(value)
        raise TypeError(f"{what} is {type(value).__name__} ({value!r:.80}), not an op of the "
                        "TF1 graph: name the op your code runs to train "
                        "(optimizer.minimize(...), tf.group(...)), or a list of them"
                        + (PROCEDURE if procedure else ""))
    if op.graph is not graph:
        raise TypeError(f"{what} ({op.name}) is an op of another graph than the loss's: "
                        "build the train op in the graph the loss is in")
    return op


def variable_name(v: Any) -> str:
    """A TF1 variable's graph name without ``:0``."""
    return v.op.name


class TF1Side:
    """One :class:`TF1Program` built in its graph, with a Session of the harness's own.

    Attributes:
      graph, session, obj: the graph, the harness's Session, the user's built object.
      placeholders: ``{feed key: placeholder}``; ``feed``: ``{placeholder: cast array}``.
      variables: ``{name: variable}`` compared, in creation order (``var_list``, default
        the trainable variables the loss depends on); ``not_compared``: the other
        trainable variables' names.
      state: ``{name: variable}``, the non-trainable variables the forward pass reads or
        its update ops assign (:mod:`pgtwin.parity.model_state`), in creation order.
    """

    def __init__(self, program: TF1Program, inputs: Mapping[str, Any], what: str = "TF1Program"):
        self.obj, graph = build_in_graph(program, what)
        with _users_graph(self.obj, graph).as_default():  # a function's ops go there
            self.loss = _tensor(resolve(self.obj, program.loss, f"{what}.loss", graph),
                                f"{what}.loss", self.obj)
        if self.loss.shape.rank not in (0, None):
            raise ValueError(f"{what}.loss {self.loss.name!r} has shape {self.loss.shape}: "
                             "the loss must be a scalar (reduce it as the train_op does)")
        # Code that makes a tf.Graph of its own (self.graph = tf.Graph()) is run in it.
        self.graph = g = self.loss.graph
        self.placeholders = self._tensors(program.feeds, f"{what}.feeds")
        self.outputs = self._tensors(program.outputs, f"{what}.outputs")
        self.train_op = None
        if program.train_op is not None:
            with g.as_default():  # a function that groups ops builds them in the graph
                refs = program.train_op
                found = [resolve(self.obj, r, f"{what}.train_op[{i}]", g)
                         for i, r in enumerate(refs)] if isinstance(refs, (list, tuple)) \
                    else resolve(self.obj, refs, f"{what}.train_op", g)
                self.train_op = train_op_of(found, f"{what}.train_op={refs!r}", g)
            accumulated = accumulators(self.train_op, g)
            if accumulated:
                raise ValueError(accumulator_message(accumulated, what))
        self.variables, self.not_compared = self._compared_variables(program, what)
        if program.var_list is not None:
            self._refuse_global_var_list(what)
        self.copies = local_copies(g, self.loss, self.train_op, self.variables,
                                   self.graph_variables())
        """``{compared name: the variable the train_op updates in its place}``: A3C's local
        copies of the global network (:mod:`pgtwin.parity.local_copies`); loaded with the
        same values, and synced from them after each step, as the user's sync op does."""
        self.not_compared = [n for n in self.not_compared if n not in self.copies.values()]
        self.state = tf1_state_variables(g, [self.loss, *self.outputs.values()],
                                         self.variables)
        self.gradient_holders = {} if self.train_op is None else fed_gradients(
            self.train_op, self.placeholders, what)
        self.feed = self._feed(inputs, what)
        with g.as_default():
            grads = tf.gradients(self.loss, list(self.variables.values()))
            self.grads = dict(zip(self.variables, grads))
            self._holder_grads = self._loss_gradients_for_holders()
            self._assign = Assigner(self.variables)
            self._assign_state = Assigner(self.state)
            self._assign_trained, self._sync = self._copy_ops()
            init = tf.group(tf1.global_variables_initializer(),
                            tf1.local_variables_initializer(), tf1.tables_initializer())
        self.session = tf1.Session(graph=g, config=op_by_op_config())
        self.session.run(init)
        self._take_users_values()

    def _refuse_global_var_list(self, what: str) -> None:
        """Refuse a ``var_list`` of variables the loss does not read where the train_op
        updates them with the gradients of copies the loss reads (A3C's global network
        named, where the loss reads a worker's): their gradients would be None."""
        reached = variable_ops([self.loss])
        by_name = self.graph_variables()
        read = {n: v for n, v in by_name.items()
                if v.op in reached and n not in self.variables and v.trainable}
        found = local_copies(self.graph, self.loss, self.train_op, read, by_name)
        named = {g: n for n, g in found.items() if g in self.variables}
        if not named:
            return
        shown = ", ".join(f"{g} (the loss reads {n})" for g, n in list(named.items())[:3])
        raise ValueError(
            f"{what}.var_list names variables the loss does not read: {shown}"
            f"{f' and {len(named) - 3} more' if len(named) > 3 else ''}. The train_op "
            "updates them with the gradients of the copies the loss reads (A3C's global "
            "network and a worker's). "
            "Leave var_list out: pgtwin then compares the variables the loss reads, steps "
            "them through the train_op's updates of their global copies, and syncs them as "
            "your code does")

    @property
    def trained(self) -> dict[str, Any]:
        """``{compared name: the variable the train_op updates for it}``: itself, or the
        global variable of a local copy (:attr:`copies`). What the optimizer's apply ops,
        slots and clipping are read from."""
        by_name = self.graph_variables()
        return {n: by_name[self.copies[n]] if n in self.copies else v
                for n, v in self.variables.items()}

    def sync_copies(self) -> None:
        """Write each of the :attr:`copies` with its trained variable's value, as the
        user's sync op does (after a checkpoint's restore: the trained weights are the
        global network's, the local copies as of their last sync)."""
        if self._sync is not None:
            self.session.run(self._sync)

    def _holder(self, x: tf.Tensor) -> str | None:
        """The attribute (or script global) of the built object that holds ``x``, if any."""
        return holder(self.obj, x)

    def _named(self, ops: list[tf.Operation]) -> str:
        """The placeholders ``ops``' graph names, and the attributes that hold them:
        ``['Placeholder_5'] (held as LR)``."""
        held = [h for h in (self._holder(op.outputs[0]) for op in ops) if h]
        return repr([op.name for op in ops]) + (f" (held as {', '.join(held)})" if held
                                                else "")

    def _ref(self, op: tf.Operation) -> str:
        """What ``TF1Program.feeds`` can name placeholder ``op`` by: the attribute that holds
        it, else its graph name."""
        return self._holder(op.outputs[0]) or op.name

    def unsynced(self) -> list[str]:
        """The :attr:`copies` whose values differ now from their trained variables' (the
        user's sync op not run since the global network changed)."""
        if not self.copies:
            return []
        by_name = self.graph_variables()
        local, trained = self.session.run(
            [[self.variables[n] for n in self.copies], [by_name[g] for g in self.copies.values()]])
        return [n for n, a, b in zip(self.copies, local, trained) if not np.array_equal(a, b)]

    def _copy_ops(self) -> tuple["Assigner", Any]:
        """An assigner of the copies' trained variables (by the copies' names), and one op
        that writes each copy with its trained variable's value (the user's sync op)."""
        by_name = self.graph_variables()
        trained = {n: by_name[g] for n, g in self.copies.items()}
        sync = tf.group(*[tf1.assign(self.variables[n], v)
                          for n, v in trained.items()]) if trained else None
        return Assigner(trained), sync

    def _take_users_values(self) -> None:
        """Give the harness's Session the values the user's own Session holds after
        ``build`` (the object's, or a script's, ``tf.Session`` on this graph): what its
        ``__init__`` ran after the initializer (``sess.run(sync_target)``, an ``old_pi``
        copied from ``pi``, a ``Saver.restore``) is the program's starting state. A
        variable that Session never initialised keeps the harness's initial value."""
        sessions = [x for x in _held(self.obj) if isinstance(
            x, (tf1.Session, tf1.InteractiveSession)) and x.graph is self.graph]
        if not sessions:
            return
        variables = self.graph_variables()
        try:
            values = sessions[0].run(variables)
        except (tf.errors.OpError, RuntimeError):  # some not initialised there, or closed
            values = {}
            for name, v in variables.items():
                try:
                    values[name] = sessions[0].run(v)
                except (tf.errors.OpError, RuntimeError):
                    continue
        if values:
            with self.graph.as_default():
                assigner = Assigner({n: variables[n] for n in values})
            assigner.run(self.session, values)

    def _tensors(self, refs: Mapping[str, Any], what: str) -> dict[str, tf.Tensor]:
        """``{key: tensor}`` each ref names in the graph (``what``: the field, for errors)."""
        return {key: _tensor(resolve(self.obj, ref, f"{what}[{key!r}]", self.graph),
                             f"{what}[{key!r}]", self.obj) for key, ref in refs.items()}

    def _compared_variables(self, program: TF1Program, what: str
                            ) -> tuple[dict[str, Any], list[str]]:
        """``({name: variable} compared, [names of the other trainable variables])``."""
        with self.graph.as_default():
            trainable = list(tf1.trainable_variables())
        if program.var_list is None:
            reached = variable_ops([self.loss])
            chosen = [v for v in trainable if v.op in reached]
        else:
            chosen = self._variables_named(program.var_list, f"{what}.var_list")
        if not chosen:
            raise ValueError(f"{what}: the loss {self.loss.name!r} depends on no trainable "
                             f"variable (trainable: {[variable_name(v) for v in trainable]})")
        compared = {variable_name(v): v for v in chosen}
        return compared, [variable_name(v) for v in trainable
                          if variable_name(v) not in compared]

    def _variables_named(self, refs: Any, what: str) -> list[Any]:
        """The variables ``refs`` name: a list of refs (attribute paths, graph names such as
        ``"eval_net/w1"``, the variables themselves, functions of the built object), or one
        function returning such a list; a name resolves to the variable, not its tensor."""
        by_op = {v.op: v for v in self.graph_variables().values()}
        with self.graph.as_default():
            found = resolve(self.obj, refs, what, self.graph) if callable(refs) else [
                resolve(self.obj, ref, f"{what}[{i}]", self.graph)
                for i, ref in enumerate(refs)]
        out = []
        for i, item in enumerate(found if isinstance(found, (list, tuple)) else [found]):
            op = getattr(item, "op", item)
            if op not in by_op:
                raise TypeError(f"{what}[{i}] is {type(item).__name__} ({item!r:.80}), not a "
                                "variable of the TF1 graph: name variables (their attribute, "
                                "their graph name such as 'scope/w', or the variable)")
            out.append(by_op[op])
        return out

    def _feed(self, inputs: Mapping[str, Any], what: str) -> dict[tf.Tensor, np.ndarray]:
        """``{placeholder: cast array}``, after checking inputs, feeds and the loss agree."""
        missing = sorted(set(self.placeholders) - set(inputs))
        extra = sorted(set(inputs) - set(self.placeholders))
        # Inputs no feed names go to the TF2 side only, where each feed has its input: the
        # raw rewards a port discounts itself, where TF1's loop fed returns made in numpy.
        self.tf2_only = {} if missing else {k: inputs[k] for k in extra}
        for key in self.tf2_only:
            default = self._defaulted(key)
            if default is not None:
                raise FeedError(
                    f"inputs[{key!r}] has the name of TF1's placeholder_with_default "
                    f"{default.name!r} (its default {_default_value(default)}), which "
                    f"{what}.feeds does not name, so TF1 would run at its default and the input "
                    f"would go to the TF2 side only: feed it with feeds={{..., {key!r}: "
                    f"{default.name!r}}}, or leave it out of the inputs")
        if missing:
            differ = [f"{label} {keys}" for label, keys in (("feeds without an input", missing),
                                                            ("inputs without a feed", extra))
                      if keys]
            raise ValueError(f"{what}: the inputs and the feeds differ: {', '.join(differ)} "
                             f"(feeds: {sorted(self.placeholders)}): give every feed key an "
                             f"input array of that name, and name in {what}.feeds the "
                             "placeholder each input goes to (an input no feed names goes to "
                             "the TF2 side only)")
        fed = {p.op for p in self.placeholders.values()}
        # A fed tensor's value replaces its op's, so what that op reads is not needed.
        replaced = lambda op: op in fed and len(op.outputs) == 1  # noqa: E731
        unfed = sorted((op for op in upstream_ops(self.loss, stop=replaced)
                        if op.type == "Placeholder" and op not in fed), key=lambda op: op.name)
        if unfed:
            raise FeedError(f"the TF1 loss needs placeholders {self._named(unfed)}, which "
                            f"{what}.feeds does not name (feeds: {sorted(self.placeholders)}): "
                            f"add feeds={{..., 'KEY': {self._ref(unfed[0])!r}}} and an input "
                            "array KEY")
        fed |= {h.op for h in self.gradient_holders}
        unfed = [] if self.train_op is None else sorted(
            (op for op in upstream_ops(self.train_op, stop=replaced)
             if op.type == "Placeholder" and op not in fed), key=lambda op: op.name)
        if unfed:
            raise FeedError(f"the TF1 train_op needs placeholders {self._named(unfed)} that the "
                            f"loss does not (a learning rate your training loop feeds?), which "
                            f"{what}.feeds does not name (feeds: {sorted(self.placeholders)}): "
                            f"add feeds={{..., 'KEY': {self._ref(unfed[0])!r}}} and an input "
                            "array KEY holding the value your loop feeds it")
        roots = [self.loss, *self.outputs.values()] + \
            ([] if self.train_op is None else [self.train_op])
        run = {op for root in roots for op in upstream_ops(root, stop=replaced)}
        cut_off = cut_off_message(self.placeholders, run, what)
        if cut_off:
            raise FeedError(cut_off)
        feed = {}
        for key, placeholder in self.placeholders.items():
            feed[placeholder] = cast_feed(key, inputs[key], placeholder)
            check_fed_indices(key, feed[placeholder], placeholder, run)
        return feed

    # ------------------------------------------------------------------ reading
    def infos(self) -> list[VariableInfo]:
        """The compared variables as :class:`VariableInfo`, in creation order."""
        return _infos(self.variables)

    def dtype(self) -> str:
        """``float32`` or ``float64``: the compared variables' float dtype."""
        dtypes = sorted({v.dtype.base_dtype.name for v in self.variables.values()})
        if len(dtypes) != 1 or dtypes[0] not in ("float32", "float64"):
            raise ValueError(f"the compared TF1 variables have dtypes {dtypes}; expected all "
                             "float32 or all float64")
        return dtypes[0]

    def values(self) -> dict[str, np.ndarray]:
        """``{name: value}`` of the compared variables now."""
        return dict(zip(self.variables, self.session.run(list(self.variables.values()))))

    def state_infos(self) -> list[VariableInfo]:
        """The state variables as :class:`VariableInfo`, in creation order."""
        return _infos(self.state)

    def state_values(self) -> dict[str, np.ndarray]:
        """``{name: value}`` of the state variables now."""
        if not self.state:
            return {}
        return dict(zip(self.state, self.session.run(list(self.state.values()))))

    def initial_draws(self, draws: int) -> dict[str, np.ndarray]:
        """``{name: [draws, *shape]}``: each variable's initializer run ``draws`` times.

        The variables are put back as they were (a comparison that starts from TF1's own
        initial values, ``weights=None``, must start from those, not from a redraw: a batch
        recorded from the program's first policy then fits it).
        """
        before = self.values()
        out = {n: [] for n in self.variables}
        for _ in range(draws):
            self.session.run([v.initializer for v in self.variables.values()])
            for n, value in self.values().items():
                out[n].append(value)
        self.load(before)
        return {n: np.stack(v) for n, v in out.items()}

    def initializer_kind(self, name: str) -> str:
        """The random op that makes the variable's initial value (``RandomUniform`` ...)."""
        v = self.variables[name]
        kinds = sorted({op.type for op in upstream_ops(v.initializer)
                        if op.type.startswith(("Random", "TruncatedNormal", "Qr",
                                               "StatelessRandom"))})
        return "+".join(kinds) or "constant"

    # ------------------------------------------------------------------ running
    def run(self, replaced: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """``{"loss": ..., output key: ...}`` on the inputs (the state left as it was: a
        loss with the update ops as control inputs would move it); ``replaced``: inputs
        fed in place of the batch's, by feed key (a replay)."""
        fetches = {"loss": self.loss, **self.outputs}
        with state_kept(self):
            return self._run(fetches, {self.placeholders[k]: v
                                       for k, v in (replaced or {}).items()})

    def set_input(self, key: str, value: Any) -> None:
        """Feed ``value`` for batch key ``key`` from now on (cast to its placeholder's dtype)."""
        ph = self.placeholders[key]
        self.feed[ph] = np.asarray(value, dtype=np.asarray(self.feed[ph]).dtype)

    def fetch(self, tensors: list[tf.Tensor]) -> list[np.ndarray]:
        """``tensors``' values on the inputs (the state left as it was)."""
        with state_kept(self):
            return self._run(list(tensors))

    def gradients(self) -> dict[str, np.ndarray | None]:
        """``{name: d loss / d variable}``; None where ``tf.gradients`` gives None."""
        present = {n: g for n, g in self.grads.items() if g is not None}
        with state_kept(self):
            values = self._run(present) if present else {}
        return {n: values.get(n) for n in self.grads}

    def load(self, weights: Mapping[str, np.ndarray]) -> None:
        """Assign every compared variable its value in ``weights`` (and the global variable
        of each local copy the same)."""
        self._assign.run(self.session, weights)
        self._assign_trained.run(self.session, weights)

    def optimizer(self) -> tuple[str, dict[str, float]]:
        """``(kind, settings)`` of the optimizer the ``train_op`` runs on the compared
        variables, read now (``optimizer_config.tf1_optimizer``; a learning rate built
        under the update ops' control would run them, so the state is put back; a
        placeholder only the train_op reads, left out of the feeds, is a
        :class:`FeedError`)."""
        with state_kept(self), _named_feeds():
            return tf1_optimizer(self.train_op, self.session, self.feed, self.trained.values())

    def unstepped(self) -> list[str]:
        """The compared variables the ``train_op`` never updates, in creation order, where
        it updates others (trainable, but frozen in effect: a DQN target network left out of
        ``minimize(var_list=...)``); none without a ``train_op``."""
        if self.train_op is None:
            return []
        stepped = tf1_stepped(self.train_op)
        trained = self.trained
        if not any(v.op in stepped for v in trained.values()):
            return []
        return [n for n, v in trained.items() if v.op not in stepped]

    def read_not_compared(self) -> list[str]:
        """The :attr:`not_compared` variables the loss reads all the same (left out of an
        explicit ``var_list``: a target network the TD target reads)."""
        reached = variable_ops([self.loss])
        by_name = self.graph_variables()
        return [n for n in self.not_compared if n in by_name and by_name[n].op in reached]

    def hold_as_state(self, names: list[str]) -> None:
        """Compare ``names`` (compared variables, or :meth:`read_not_compared` ones) as
        state from now on: loaded, and read after each step, but not trained (where the TF2
        side freezes their partners)."""
        by_name = self.graph_variables()
        moved = {n: self.variables.pop(n) if n in self.variables else by_name[n]
                 for n in names}
        for n in names:
            self.grads.pop(n, None)
            self.copies.pop(n, None)
        self.not_compared = [n for n in self.not_compared if n not in moved]
        order = {v.op: i for i, v in enumerate(self.graph_variables().values())}
        self.state = dict(sorted({**self.state, **moved}.items(),
                                 key=lambda item: order.get(item[1].op, len(order))))
        with self.graph.as_default():
            self._assign = Assigner(self.variables)
            self._assign_state = Assigner(self.state)
            self._assign_trained, self._sync = self._copy_ops()

    def graph_variables(self) -> dict[str, Any]:
        """``{name: variable}`` of every variable of the graph, in creation order."""
        with self.graph.as_default():
            return {variable_name(v): v for v in tf1.global_variables()}

    def stepped_not_compared(self) -> dict[str, str]:
        """``{name: optimizer kind}`` of the trainable variables left out of the comparison
        (:attr:`not_compared`) that the ``train_op`` updates all the same (DDPG's actor,
        trained through ``tf.gradients(mu, params, -dQ/da)`` while the loss is the
        critic's)."""
        if self.train_op is None or not self.not_compared:
            return {}
        stepped = tf1_stepped(self.train_op)
        with self.graph.as_default():
            by_name = {variable_name(v): v for v in tf1.trainable_variables()}
        return {n: stepped[by_name[n].op] for n in self.not_compared
                if n in by_name and by_name[n].op in stepped}

    def optimizer_by_variable(self) -> dict[str, tuple[str, dict[str, float]]]:
        """``{name: (kind, settings)}`` of the apply op that updates each compared variable,
        read now as :meth:`optimizer` reads them (an actor's and a critic's optimizer apart;
        a variable the ``train_op`` does not update is left out)."""
        with state_kept(self), _named_feeds():
            return tf1_settings_by_variable(self.train_op, self.session, self.feed,
                                            self.trained)

    def assigner_of(self, name: str) -> str:
        """The first op the ``train_op`` runs that assigns state variable ``name`` (a
        target network's soft update), with the ``tf.group`` that runs it where there is
        one (``AssignVariableOp_3 in soft_update``), else ''."""
        if self.train_op is None:
            return ""
        target, via = self.state[name].op, {self.train_op: None}
        queue = deque([self.train_op])
        while queue:
            op = queue.popleft()
            if op.type in ASSIGN_OPS and op.inputs and op.inputs[0].op is target:
                group = via[op]
                while group is not None and group.type != "NoOp":
                    group = via[group]
                return op.name + (f" in {group.name}" if group is not None else "")
            for parent in [t.op for t in op.inputs] + list(op.control_inputs):
                if parent not in via:
                    via[parent] = op
                    queue.append(parent)
        return ""

    def adam_moments(self) -> dict[str, np.ndarray]:
        """``{name: Adam's first moment m}`` now, for the compared variables the
        ``train_op`` steps with Adam (``optimizer_config.tf1_adam_moments``); else empty."""
        slots = tf1_adam_moments(self.train_op, self.graph, self.trained)
        return dict(zip(slots, self.session.run(list(slots.values())))) if slots else {}

    def _defaulted(self, key: str) -> tf.Operation | None:
        """TF1's ``placeholder_with_default`` op named ``key`` (its last name component), if
        the graph has one."""
        return next((op for op in self.graph.get_operations()
                     if op.type == "PlaceholderWithDefault"
                     and op.name.split("/")[-1] == key), None)

    def tf2_inputs(self) -> dict[str, Any]:
        """The inputs as the TF2 side takes them: each feed's as cast for its placeholder,
        and those no feed names (:attr:`tf2_only`) as given."""
        return {**self.tf2_only,
                **{key: self.feed[ph] for key, ph in self.placeholders.items()}}

    def load_state(self, values: Mapping[str, np.ndarray]) -> None:
        """Assign every state variable its value in ``values``."""
        self._assign_state.run(self.session, values)

    def step(self) -> None:
        """One run of the user's ``train_op`` on the inputs; its gradient placeholders
        (:attr:`gradient_holders`) fed the loss's gradients at the weights of this step."""
        with _named_feeds():
            self.session.run(self.train_op, self._train_feed())
        if self._sync is not None:  # the copies take the trained weights, as A3C's sync
            self.session.run(self._sync)

    def _train_feed(self) -> dict[tf.Tensor, np.ndarray]:
        """:attr:`feed`, and the gradient placeholders fed the loss's gradients now."""
        if not self._holder_grads:
            return self.feed
        fed = dict(zip(self._holder_grads, self._run(list(self._holder_grads.values()))))
        return {**self.feed, **fed}

    def unclipped(self) -> set[str]:
        """The compared variables whose gradient into the ``train_op``'s apply op equals the
        loss's gradient now (to 1e-6 relative: a clip's ``t * c / c``): where TF1 clips,
        the clip does not act on this batch at these weights."""
        names = {v.op: n for n, v in self.trained.items()}
        applied = {names[op.inputs[0].op]: gradient_input(op)
                   for op in upstream_ops(self.train_op) if apply_kind(op.type)
                   and "Sparse" not in op.type and op.inputs[0].op in names}
        raw = self.gradients()
        with state_kept(self):
            values = self.session.run(applied, self._train_feed()) if applied else {}
        return {n for n, a in values.items() if raw.get(n) is not None
                and np.shape(a) == np.shape(raw[n]) and np.allclose(a, raw[n], rtol=1e-6, atol=0)}

    def clip_threshold(self, names: list[str]) -> float | None:
        """The threshold of TF1's clipping of these variables' gradients, as the Keras
        setting of that kind would read (:func:`tf1_clip_thresholds`), where one value
        serves all of them; else None."""
        trained = self.trained
        found = tf1_clip_thresholds(self.train_op, self.loss, [trained[n] for n in names])
        if not found:
            return None
        values = [sign * float(v) for (_, sign), v in zip(
            found, self.session.run([t for t, _ in found], self._train_feed()))]
        first = values[0]
        return first if all(np.isclose(v, first, rtol=1e-6, atol=0) for v in values) else None

    def _loss_gradients_for_holders(self) -> dict[tf.Tensor, tf.Tensor]:
        """``{holder: d loss / d its variable}`` (zeros where the loss does not read the
        variable) for :attr:`gradient_holders`; built in the graph, under its default."""
        by_op = {v.op: v for v in self.graph_variables().values()}
        variables = [by_op[op] for op in self.gradient_holders.values()]
        grads = tf.gradients(self.loss, variables) if variables else []
        return {h: tf.zeros_like(v) if g is None else g
                for h, v, g in zip(self.gradient_holders, variables, grads)}

    def gradient_feed_note(self) -> str:
        """What the harness feeds the ``train_op``'s gradient placeholders, '' if none."""
        if not self.gradient_holders:
            return ""
        pairs = ", ".join(f"{h.op.name!r} <- d loss / d {op.name}"
                          for h, op in self.gradient_holders.items())
        return ("TF1's train_op applies gradients fed through placeholders (a gradient-buffer "
                f"loop): each step the harness feeds them the loss's gradients on the batch "
                f"at that step's weights ({pairs}), as your loop does over one batch")

    def restate_optimizer(self, make: Any) -> None:
        """Make ``train_op`` ``make()``'s step on the compared variables' gradients, with
        the graph's ``UPDATE_OPS`` (moving statistics) run alongside."""
        _, step = restated_step(self.graph, self.session, make, self.grads, self.trained)
        with self.graph.as_default():  # as a train_op built with minimize() under them
            updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
            self.train_op = tf.group(step, *updates) if updates else step

    def _run(self, fetches: Any, replaced: Mapping[tf.Tensor, np.ndarray] | None = None) -> Any:
        """``fetches`` run on :attr:`feed`, with ``replaced`` fed over it."""
        with _named_feeds():
            return self.session.run(fetches, {**self.feed, **(replaced or {})})

    def close(self) -> None:
        """Close the harness's Session and any Session the user's object opened."""
        self.session.close()
        holders = self.obj.values() if isinstance(self.obj, Mapping) else \
            vars(self.obj).values() if hasattr(self.obj, "__dict__") else ()
        for value in list(holders):
            if isinstance(value, tf1.Session) and value.graph is self.graph:
                value.close()


def restated_step(graph: tf.Graph, session: Any, make: Any, grads: Mapping[str, Any],
                  variables: Mapping[str, Any]) -> tuple[Any, tf.Operation]:
    """``(optimizer, train op)``: ``make()``'s ``apply_gradients`` on ``grads`` in ``graph``.

    Only the optimizer's new variables (slots, beta powers) are initialised, so the
    weights stay as loaded. Gradients that are None are left out.
    """
    with graph.as_default():
        before = {v.ref() for v in tf1.global_variables()}
        optimizer = make()
        pairs = [(g, variables[n]) for n, g in grads.items() if g is not None]
        train_op = optimizer.apply_gradients(pairs) if pairs else tf.no_op()
        fresh = [v for v in tf1.global_variables() if v.ref() not in before]
        session.run(tf1.variables_initializer(fresh))
    return optimizer, train_op


def _held(obj: Any) -> list[Any]:
    """What the user's built object holds: its attributes, or a script's globals."""
    if isinstance(obj, Mapping):
        return list(obj.values())
    return list(vars(obj).values()) if hasattr(obj, "__dict__") else []


def _users_graph(obj: Any, graph: tf.Graph) -> tf.Graph:
    """The graph the user's built object works in: that of a tensor, op, variable, Session
    or graph it holds as an attribute (code that makes a ``tf.Graph()`` of its own), else
    ``graph``, the harness's."""
    for value in _held(obj):
        if isinstance(value, tf.Graph):
            return value
        found = getattr(value, "graph", None)
        if isinstance(found, tf.Graph) and isinstance(
                value, (tf.Tensor, tf.Operation, tf.Variable, tf1.Session,
                        tf1.InteractiveSession)):
            return found
    return graph


def build_in_graph(program: TF1Program, what: str) -> tuple[Any, tf.Graph]:
    """``(the user's object, the harness's graph)``: ``program.build()`` run in a new graph.

    With TF1 variable semantics, switch-offs of eager execution refused, and a graph seed
    the user's own ``tf.set_random_seed`` overrides (unseeded random ops are refused where
    op determinism is on, as after ``pgtwin train --deterministic`` in the same process).
    Errors old code meets on TF 2.x come back explained (:func:`explain_build_error`), the
    names tf_slim 1.1 reads from TensorFlow internals are there (:func:`slim_names`), and
    anything else the user's code raises is named with its line (``ProgramBuildError``).
    """
    require_eager(f"{what}.build")
    graph = tf.Graph()
    try:
        with graph.as_default(), tf1_variables(program.ref_variables), eager_guard(), \
                slim_names():
            tf1.set_random_seed(GRAPH_SEED)
            with python_random_seeded(GRAPH_SEED):
                obj = program.build()
    except LegacyCodeError:
        raise
    except Exception as err:  # noqa: BLE001  (the user's code: explained or named, not hidden)
        explained = explain_build_error(err, f"{what}.build")
        raise (explained or program_failed(err, f"{what}.build")) from err
    require_eager(f"{what}.build")
    return obj, graph


def _infos(variables: Mapping[str, Any]) -> list[VariableInfo]:
    return [VariableInfo(n, tuple(v.shape.as_list()), v.dtype.base_dtype.name)
            for n, v in variables.items()]


def holder(obj: Any, x: Any) -> str | None:
    """The attribute of ``obj`` (or key of a script's globals) that holds ``x``, if any."""
    names = obj if isinstance(obj, dict) else getattr(obj, "__dict__", {})
    return next((k for k, v in names.items() if v is x and not k.startswith("_")), None)


def held_name(obj: Any, x: tf.Tensor) -> str:
    """``x``'s graph name, after the name ``obj`` (the user's built object) holds it under
    where it holds it: ``v_loss (Mean_1)``, ``LR (Placeholder_5)``."""
    held = holder(obj, x)
    return x.op.name if held is None else f"{held} ({x.op.name})"


class Assigner:
    """One op that assigns ``variables`` (``{name: variable}``) values fed by name (built
    in the variables' graph)."""

    def __init__(self, variables: Mapping[str, Any]):
        self.placeholders = {n: tf1.placeholder(v.dtype.base_dtype, v.shape)
                             for n, v in variables.items()}
        self.op = tf.group(*[tf1.assign(v, self.placeholders[n])
                             for n, v in variables.items()])

    def run(self, session: Any, values: Mapping[str, np.ndarray]) -> None:
        if self.placeholders:
            session.run(self.op, {ph: values[n] for n, ph in self.placeholders.items()})
