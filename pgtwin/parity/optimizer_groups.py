"""Which optimizer steps which compared pair, on each side.

Actor-critic TF1 code trains its actor and its critic with two optimizers, each with its
own learning rate (``tf.group(actor_opt.minimize(...), critic_opt.minimize(...))``), and
its TF2 port holds two Keras optimizers. Read as one optimizer, the TF1 side is "mixed" and
every setting fails; a Keras optimizer other than the one found first goes unread. A group
is the pairs one TF1 optimizer setting steps on the TF1 side and one Keras optimizer on the
TF2 side: its settings rows, its train-step gradients and its weights' tolerances are its
own.

Which Keras optimizer steps a variable is read from the optimizer's own index (built by its
first ``apply_gradients``, so after the first step): Keras 3's ``_get_variable_index``,
``tf_keras``' ``_index_dict``, a legacy optimizer's slots.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgtwin.parity.ladder import Row

NONE = ("none", {})
"""``(kind, settings)`` of a TF1 variable no apply op of the ``train_op`` updates."""


@dataclass
class OptimizerGroup:
    """The pairs one TF1 optimizer and one Keras optimizer step.

    Attributes:
      tf1_names: the TF1 names of its pairs, in the mapping's order.
      tf1_kind, tf1_settings: TF1's optimizer, read before the first step.
      keras: the Keras optimizer that steps the pairs' TF2 variables, or None (none found,
        or none that can tell).
      keras_kind, keras_settings: ``keras``'s, read before the first step ("" and {} for
        None).
      label: what the rows call the group ("" when it is the only one).
    """

    tf1_names: list[str]
    tf1_kind: str
    tf1_settings: dict[str, float]
    keras: Any
    keras_kind: str = ""
    keras_settings: dict[str, float] = field(default_factory=dict)
    label: str = ""

    def named(self, rows: Sequence[Row]) -> list[Row]:
        """``rows`` with their items prefixed by the group's label, when it has one."""
        if not self.label:
            return list(rows)
        return [Row(r.rung, f"{self.label}: {r.item}", r.max_abs, r.max_rel, r.ok, r.note,
                    r.context) for r in rows]


def keras_owns(optimizer: Any, variable: Any) -> bool | None:
    """Whether the Keras ``optimizer`` steps ``variable`` (as the user's code holds it),
    from the optimizer's own index; None where it cannot tell (not built yet, or a legacy
    optimizer that keeps no slot for it)."""
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        if not getattr(optimizer, "built", False):
            return None
        try:
            optimizer._get_variable_index(variable)  # noqa: SLF001
        except (KeyError, ValueError, AttributeError):
            return False
        return True
    key = getattr(optimizer, "_var_key", None)
    index = getattr(optimizer, "_index_dict", None)  # tf_keras' optimizers
    if key is not None and index:
        return key(variable) in index
    slots = getattr(optimizer, "_slots", None)  # tf_keras' legacy optimizers
    if key is not None and slots:
        return key(variable) in slots
    return None


def keras_owner(optimizers: Sequence[Any], variable: Any) -> Any:
    """The one of ``optimizers`` that steps ``variable``: the first whose index holds it;
    else the only one there is, unless its index tells it does not (a DQN's target network,
    trainable but left out of every step); else None."""
    found = next((o for o in optimizers if keras_owns(o, variable)), None)
    if found is None and len(optimizers) == 1 and keras_owns(optimizers[0], variable) is None:
        return optimizers[0]
    return found


def form_groups(pairs: Sequence[tuple[str, Any]],
                tf1_by_name: Mapping[str, tuple[str, dict[str, float]]],
                keras_before: Mapping[int, tuple[str, dict[str, float]]],
                owners: Mapping[str, Any]) -> list[OptimizerGroup]:
    """The groups of ``pairs`` ``(TF1 name, TF2 name)``, in the order of their first pair.

    ``tf1_by_name``: ``{TF1 name: (kind, settings)}`` of the apply op that updates it (a
    name missing: :data:`NONE`); ``keras_before``: ``{id(optimizer): (kind, settings)}``
    read before the first step; ``owners``: ``{TF2 name: Keras optimizer or None}``."""
    groups: dict[tuple, OptimizerGroup] = {}
    for tf1_name, tf2_name in pairs:
        kind, settings = tf1_by_name.get(tf1_name, NONE)
        owner = owners.get(tf2_name)
        key = (kind, tuple(sorted(settings.items())), id(owner))
        if key not in groups:
            keras_kind, keras_settings = keras_before.get(id(owner), ("", {}))
            groups[key] = OptimizerGroup([], kind, dict(settings), owner, keras_kind,
                                         dict(keras_settings))
        groups[key].tf1_names.append(tf1_name)
    found = list(groups.values())
    if len(found) > 1:
        for group in found:
            group.label = group_label(group.tf1_names)
    return found


def group_label(names: Sequence[str]) -> str:
    """The names' common scope as ``scope/*`` (``actor/*``), else the first name and how
    many more."""
    scope = os.path.commonpath([n.split(":")[0] for n in names]) if len(names) > 1 else ""
    if scope:
        return f"{scope}/*"
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
