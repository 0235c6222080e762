"""The user's TF1 and TF2 code as the migration harness takes it: what to build, what to read.

Neither side is rewritten for the harness. :class:`TF1Program` says how to build the old
object (a class whose ``__init__`` makes placeholders, layers, loss, optimizer and a
``Session``; or a notebook-style script, :meth:`TF1Program.from_script`) and which of its
tensors are the feeds, the loss, extra outputs and the user's ``train_op``.
:class:`TF2Program` says how to build the new object (a Keras 3 or ``tf_keras`` model, a
``tf.Module``, or a class holding one) and gives the user's loss function and, optionally,
their train step.

A *reference* (:data:`Ref`) to something the built TF1 object holds is one of:

* an attribute path on the object, or a key of the dict it is: ``"loss"``, ``"ph.obs"``;
* a graph name: ``"loss/Mean:0"`` (a tensor), ``"obs"`` (an op or ``obs:0``);
* a callable ``obj -> tensor``;
* the tensor or operation itself.

``pgtwin compare --tf1 MODULE:FACTORY --tf2 MODULE:FACTORY`` calls each FACTORY (with
``dtype=...`` when it takes a ``dtype`` argument) to get these descriptions.
"""
from __future__ import annotations

import difflib
import inspect
import os
import runpy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Ref = Any
"""str (attribute path or graph name), a callable ``obj -> value``, or the value itself."""


@dataclass(frozen=True)
class TF1Program:
    """The old TF1 code, built by the harness in a ``tf.Graph`` of its own.

    Fields:
      build: zero-argument callable that builds the user's object (placeholders, variables,
        loss, optimizer, ``Session``): the class itself, ``lambda: Agent(4, 2)``, or
        :meth:`from_script`'s runner. It runs with the harness's graph as the default graph
        and TF1's variable semantics where old code needs them
        (:func:`pgtwin.parity.tf1_side.tf1_variables`: ``get_global_step`` finds a
        ``tf.Variable(0, name="global_step")``).
      feeds: ``{batch key: placeholder ref}``; each numpy input is cast to the
        placeholder's declared dtype, as ``feed_dict`` does.
      loss: ref of the scalar loss.
      outputs: ``{key: tensor ref}`` compared with :attr:`TF2Program.outputs` by key.
      train_op: ref of the user's training op (``optimizer.minimize(...)``), or a list of
        refs (an actor's and a critic's, as ``sess.run([a, c])`` runs them: grouped); a
        function's ops are built in the program's graph. The weights rung runs it. None: no TF1 optimizer step unless ``compare``'s ``optimizer`` restates one.
      var_list: refs of the variables to compare; None: the trainable variables the loss
        depends on (the rest are listed as "not compared").
      ref_variables: build with TF1's ref variables instead of resource ones, for code
        that needs refs; their reads race with the ``train_op``'s in-place updates, so the
        weights rung is not exact then.
    """

    build: Callable[[], Any]
    feeds: Mapping[str, Ref]
    loss: Ref
    outputs: Mapping[str, Ref] = field(default_factory=dict)
    train_op: Ref | None = None
    var_list: Sequence[Ref] | None = None
    ref_variables: bool = False

    @classmethod
    def from_script(cls, path: str | os.PathLike, **fields: Any) -> "TF1Program":
        """A notebook-style script that builds its graph at top level, run by the harness.

        The script is executed as ``__main__``'s sibling (``run_name`` ``"__pgtwin__"``, so
        a training loop under ``if __name__ == "__main__":`` does not run) inside the
        harness's graph; refs are names in its globals (``loss="loss"``).
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"TF1Program.from_script: no script at {path!r}")
        return cls(build=lambda: runpy.run_path(path, run_name="__pgtwin__"), **fields)


@dataclass(frozen=True)
class TF2Program:
    """The new TF2 code: the user's model, loss and (optionally) train step, as they are.

    Fields:
      build: zero-argument callable returning the user's object: a Keras 3 or ``tf_keras``
        model or layer, a ``tf.Module``, or any object holding one (an agent class).
      loss: ``loss(obj, inputs) -> loss | {"loss": loss, key: tensor}`` with ``inputs`` a
        dict of tensors keyed like :attr:`TF1Program.feeds`. Run eagerly under a
        ``GradientTape`` (it may call ``tf.function``\\ s); the variables it reads are the
        TF2 side's variables, in the order it first reads them.
      outputs: keys of the loss's dict to compare with the TF1 outputs; None: every key
        of ``TF1Program.outputs`` (one the loss does not return fails: the TF1 side asked
        for it), and the loss's other keys are left out.
      train_step: the user's own step, ``train_step(obj, inputs)``, with their optimizer and
        their ``apply_gradients``; the weights rung runs it. None: when ``optimizer`` is
        given, the harness applies it to the loss's gradients.
      optimizer: ref (attribute path, callable ``obj -> optimizer``, or the optimizer) of the
        Keras optimizer whose hyperparameters are compared with TF1's; None: the first
        Keras optimizer found on the object.
      model: ref of the part of the object that holds the variables (for naming and for
        checkpoints); None: the object itself.
    """

    build: Callable[[], Any]
    loss: Callable[[Any, dict], Any]
    outputs: Sequence[str] | None = None
    train_step: Callable[[Any, dict], Any] | None = None
    optimizer: Ref | None = None
    model: Ref | None = None


def resolve(obj: Any, ref: Ref, what: str, graph: Any = None) -> Any:
    """The value ``ref`` names on ``obj`` (see the module docstring), else a clear error.

    Args:
      obj: the built object (or a script's globals dict).
      ref: the reference.
      what: what it is, for the error (``"TF1Program.loss"``).
      graph: a ``tf.Graph`` to look a name up in when ``obj`` has no such attribute.
    """
    if inspect.isroutine(ref):  # a function or lambda; a Keras model is callable but a value
        return ref(obj)
    if not isinstance(ref, str):
        return ref
    found = _attribute_path(obj, ref)
    if found is not _MISSING:
        return found
    if graph is not None:
        for name in (f"{ref}:0", ref) if ":" not in ref else (ref,):
            try:
                return graph.as_graph_element(name)
            except (KeyError, ValueError):
                continue
    attrs = sorted(obj) if isinstance(obj, Mapping) else sorted(
        a for a in vars(obj) if not a.startswith("__")) if hasattr(obj, "__dict__") else []
    near = difflib.get_close_matches(ref, attrs, n=1, cutoff=0.6)
    raise LookupError(f"{what}={ref!r}: the built object ({type(obj).__name__}) has no such "
                      f"attribute or key" + (", and its graph no such tensor or op"
                                             if graph is not None else "")
                      + (f": did you mean {near[0]!r}?" if near else "")
                      + f" (attributes: {attrs[:30]})")


_MISSING = object()


def _attribute_path(obj: Any, path: str) -> Any:
    """``obj.a.b`` or ``obj["a"]["b"]`` for ``"a.b"``, else ``_MISSING``."""
    current = obj
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif not isinstance(current, Mapping) and hasattr(current, part) and part:
            current = getattr(current, part)
        else:
            return _MISSING
    return current
