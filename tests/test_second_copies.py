"""A checkpoint with a second set of the converted variables (a model built twice in the
process that saved it), and a Keras weights file given as the checkpoint
(pgtwin.migrate.second_copies, tf1_checkpoint.checkpoint_prefix)."""
from __future__ import annotations

import numpy as np
import pytest

from pgtwin.migrate.second_copies import second_set_note
from pgtwin.migrate.tf1_checkpoint import checkpoint_prefix


def _values(trained_differs: bool = True):
    rng = np.random.default_rng(12)
    first = {"dense/kernel": rng.normal(size=(4, 8)), "dense/bias": np.zeros(8),
             "dense_1/kernel": rng.normal(size=(8, 2)), "dense_1/bias": np.zeros(2)}
    second = {k.replace("dense_1", "dense_3").replace("dense/", "dense_2/"):
              v + (0.1 if trained_differs else 0.0) for k, v in first.items()}
    slots = {f"{k}/Adam": np.ones_like(v) for k, v in second.items()}  # Adam's, no set
    return {**first, **second, **slots, "beta1_power": np.float32(0.9)}


CONVERTED = {"dense/kernel": "sequential/dense/kernel", "dense/bias": "sequential/dense/bias",
             "dense_1/kernel": "sequential/dense_1/kernel",
             "dense_1/bias": "sequential/dense_1/bias"}


def test_a_second_set_with_other_values_is_warned_with_the_map_that_takes_it():
    values = _values()
    left = sorted(set(values) - set(CONVERTED))
    note = second_set_note(values, CONVERTED, left)
    assert note.startswith(
        "WARNING the checkpoint holds a second set of variables of the converted ones' "
        "shapes, with other values, under other names: dense_2/kernel (dense/kernel), "
        "dense_2/bias (dense/bias), dense_3/kernel (dense_1/kernel), dense_3/bias "
        "(dense_1/bias)."), note
    assert "--map dense_2/kernel=sequential/dense/kernel --map dense_2/bias=" \
           "sequential/dense/bias" in note


def test_no_second_set_is_warned_where_it_holds_the_same_values_or_is_incomplete():
    same = _values(trained_differs=False)
    assert second_set_note(same, CONVERTED, sorted(set(same) - set(CONVERTED))) == ""
    values = _values()
    # dense_1/bias has no match once dense_3/bias is left out: its Adam slot, of its
    # shape, is no variable of a second set
    partial = [n for n in values if n not in CONVERTED and n != "dense_3/bias"]
    assert second_set_note(values, CONVERTED, partial) == ""


@pytest.mark.parametrize("suffix", [".h5", ".keras"])
def test_a_keras_weights_file_is_named_as_one_not_as_a_missing_prefix(tmp_path, suffix):
    path = tmp_path / f"w{suffix}"
    path.write_bytes(b"\x89HDF\r\n")
    with pytest.raises(ValueError, match=r"is a Keras weights file \(model.save_weights or "
                                         r"model.save\), not a TF1 Saver checkpoint: .* "
                                         r"model.load_weights\(path\)"):
        checkpoint_prefix(str(path))
