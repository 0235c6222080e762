"""A feed that replaces a tensor the TF1 graph computes from other fed placeholders is
refused before anything runs, naming both and the fix (pgtwin.parity.feed_cuts): with it,
the code between them was silently left out of the comparison."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pgtwin.parity.programs import TF1Program
from pgtwin.parity.tf1_side import FeedError, TF1Side

tf1 = tf.compat.v1


class InGraphReturns:
    """Old code that discounts its rewards in the graph: returns = rewards * gamma (a
    stand-in for the scan), a policy over obs, a loss that reads both, and a sampled
    action drawn from the logits."""

    def __init__(self):
        self.obs = tf1.placeholder(tf.float32, [None, 3], name="obs")
        self.rewards = tf1.placeholder(tf.float32, [None], name="rewards")
        self.gamma = tf1.placeholder(tf.float32, [], name="gamma")
        self.returns = tf.multiply(self.rewards, self.gamma, name="discounted")
        w = tf1.get_variable("w", [3, 2], tf.float32)
        self.logits = tf.matmul(self.obs, w)
        self.sample = tf.squeeze(tf.random.categorical(self.logits, 1), 1, name="sample")
        logp = -tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.sample,
                                                                logits=self.logits)
        self.loss = -tf.reduce_mean(logp * self.returns)


BATCH = {"obs": np.ones((4, 3)), "rewards": np.ones(4), "gamma": np.array(0.9),
         "returns": np.ones(4), "sample": np.array([0, 1, 1, 0])}


def _side(*keys):
    program = TF1Program(build=InGraphReturns, loss="loss", feeds={k: k for k in keys})
    return TF1Side(program, {k: BATCH[k] for k in keys})


def test_a_fed_tensor_computed_from_fed_placeholders_is_refused_with_the_fix():
    with pytest.raises(FeedError) as err:
        _side("obs", "rewards", "gamma", "returns", "sample")
    assert str(err.value) == (
        "TF1Program.feeds['returns'] replaces discounted:0, a tensor the TF1 graph computes "
        "from the fed placeholders 'rewards' and 'gamma', so with it fed nothing reads them "
        "and the code between them and discounted:0 never runs: it would not be compared. To "
        "compare that code, drop 'returns' from TF1Program.feeds and from the inputs (the TF2 "
        "side then gets 'rewards' and 'gamma' too); if your training loop fed 'returns' "
        "itself, drop 'rewards' and 'gamma' instead")


@pytest.mark.parametrize("keys", [
    ("obs", "rewards", "gamma", "sample"),  # the sample replaced: obs still reaches the logits
    ("obs", "returns", "sample"),  # the loop's own returns, no rewards fed
], ids=["sample-fed", "returns-only"])
def test_a_fed_tensor_that_strands_no_fed_placeholder_is_fine(keys):
    _side(*keys).close()  # nothing raised


def test_an_input_named_like_an_unfed_placeholder_with_default_is_refused_with_the_feed():
    # The old loop fed keep_prob 0.5; the batch holds it and feeds does not name it, so
    # TF1 ran at its default 1.0 while the input went to the TF2 side only
    class Dropping(InGraphReturns):
        def __init__(self):
            super().__init__()
            self.keep_prob = tf1.placeholder_with_default(1.0, [], name="keep_prob")

    program = TF1Program(build=Dropping, loss="loss",
                         feeds={k: k for k in ("obs", "returns", "sample")})
    inputs = {k: BATCH[k] for k in ("obs", "returns", "sample")}
    with pytest.raises(FeedError) as err:
        TF1Side(program, {**inputs, "keep_prob": np.array(0.5)})
    assert str(err.value).startswith(
        "inputs['keep_prob'] has the name of TF1's placeholder_with_default 'keep_prob' (its "
        "default 1.0), which TF1Program.feeds does not name"), str(err.value)
    assert "feeds={..., 'keep_prob': 'keep_prob'}" in str(err.value)
