"""Feeds that contradict each other: a fed tensor the graph computes from placeholders that
are fed too.

``feed_dict`` can replace any tensor, and old code sometimes fed one it had computed in
numpy (``returns``) instead of the placeholders its graph computes it from (``rewards``,
``gamma``). Where ``TF1Program.feeds`` names both, the fed tensor wins: the graph's code
between them never runs, nothing reads the placeholders, and the comparison silently leaves
that code out. A port with the same mistake as the batch then passes (a trial on
in-graph discounted returns: forward-discounted returns in the batch and in the port, every
rung passed). :func:`cut_off_message` says which feeds to drop.

Feeding a computed tensor is fine where the placeholders upstream of it still reach what is
compared by another path (a sampled action fed in place of the graph's sample: the
observations still reach the logits), so only placeholders left with no path are named.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import tensorflow as tf

from pgtwin.parity.graph_walk import upstream_ops


def cut_off_message(feeds: Mapping[str, tf.Tensor], run: Collection[tf.Operation],
                    what: str) -> str | None:
    """Why feeds in ``feeds`` (``{key: fed tensor}``) cut others off from what is compared,
    with the fix; None where none does. ``run``: the ops the loss, outputs and ``train_op``
    depend on, walked up to the fed tensors (what runs)."""
    replaced = {t.op: key for key, t in feeds.items()
                if not t.op.type.startswith("Placeholder") and len(t.op.outputs) == 1}
    if not replaced:
        return None
    cut = set(run)
    placeholders = {t.op: key for key, t in feeds.items() if t.op.type.startswith("Placeholder")}
    stranded = [op for op in placeholders if op not in cut]
    culprits = {}
    reads = {fed_op: set(upstream_ops(fed_op)) for fed_op in replaced} if stranded else {}
    for op in stranded:
        for fed_op, key in replaced.items():
            if op in reads[fed_op]:
                culprits.setdefault(key, []).append(placeholders[op])
    if not culprits:
        return None
    key, keys = next(iter(culprits.items()))
    name = feeds[key].name
    return (f"{what}.feeds[{key!r}] replaces {name}, a tensor the TF1 graph computes from the "
            f"fed placeholders {_listed(keys)}, so with it fed nothing reads them and the code "
            f"between them and {name} never runs: it would not be compared. To compare that "
            f"code, drop {key!r} from {what}.feeds and from the inputs (the TF2 side then "
            f"gets {_listed(keys)} too); if your training loop fed {key!r} itself, drop "
            f"{_listed(keys)} instead")


def _listed(keys: Sequence[str]) -> str:
    return " and ".join(repr(k) for k in keys)
