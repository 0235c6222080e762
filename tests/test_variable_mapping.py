"""Inferring which TF2 variable holds which TF1 variable (pgtwin.parity.variable_mapping), and the
initialisation rung's statistics (pgtwin.parity.initialisation) against hand-derived values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pgtwin.parity.initialisation import (initial_value_row, ks_pvalue, ks_statistic, tf1_family,
                                          tf2_family, variance_ratio_pvalue)
from pgtwin.parity.variable_mapping import MappingError, VariableInfo, infer_mapping, kind

V = VariableInfo
TF1 = [V("actor/fc1/W", (4, 64)), V("actor/fc1/b", (64,)), V("actor/fc2/W", (64, 64)),
       V("actor/fc2/b", (64,)), V("actor/out/W", (64, 2)), V("actor/out/b", (2,))]
KERAS = [V("sequential/dense/kernel", (4, 64)), V("sequential/dense/bias", (64,)),
         V("sequential/dense_1/kernel", (64, 64)), V("sequential/dense_1/bias", (64,)),
         V("sequential/dense_2/kernel", (64, 2)), V("sequential/dense_2/bias", (2,))]


def pairs(mapping):
    return [(p.tf1.name, p.tf2.name, p.how) for p in mapping.pairs]


def test_kinds_come_from_the_last_name_component():
    assert [kind(n) for n in ("a/W", "weights", "x/kernel:0", "b", "l/biases", "log_std")] == \
        ["kernel", "kernel", "kernel", "bias", "bias", "other"]
    # hand-written short names, as prefix or suffix
    assert [kind(n) for n in ("W1", "w_pi", "fc_w", "b2", "bias_out", "value_b")] == \
        ["kernel", "kernel", "kernel", "bias", "bias", "bias"]
    # a name that says nothing: the rank decides
    assert [kind("theta", (4, 2)), kind("log_std", (2,)), kind("temperature", ())] == \
        ["kernel", "bias", "other"]
    # a normalisation's gamma and beta: kinds of their own, whatever their rank
    assert [kind("bn/gamma", (8,)), kind("ln/scale", (8,)), kind("BatchNorm/beta", (8,)),
            kind("ln/offset", (8,))] == ["scale", "scale", "offset", "offset"]


def test_freely_named_tf_variables_pair_with_keras_layers_by_order_and_shape():
    tf1 = [V("W1", (4, 16)), V("b1", (16,)), V("W2", (16, 2)), V("b2", (2,))]
    tf2 = [V("policy/theta1", (4, 16)), V("policy/offset1", (16,)),
           V("policy/theta2", (16, 2)), V("policy/offset2", (2,))]
    mapping = infer_mapping(tf1, tf2)
    assert mapping.ok and [p.tf2.name for p in mapping.pairs] == [v.name for v in tf2]


def test_creation_order_and_shape_pair_a_whole_network():
    mapping = infer_mapping(TF1, KERAS)
    assert mapping.ok
    assert [(a, b) for a, b, _ in pairs(mapping)] == [(a.name, b.name) for a, b in zip(TF1, KERAS)]
    assert {how for *_, how in pairs(mapping)} == {"creation order and shape"}
    assert "actor/fc2/W" in mapping.to_table() and "paired by" in mapping.to_table()


def test_a_bias_only_one_side_has_leaves_the_rest_paired_and_is_never_given_a_kernel():
    tf1 = TF1[:-1]  # the TF1 output layer has no bias
    mapping = infer_mapping(tf1, KERAS)
    assert len(mapping.pairs) == 5
    [problem] = mapping.problems
    assert (problem.side, problem.variable.name) == ("TF2", "sequential/dense_2/bias")
    assert "use_bias=False" in problem.message
    with pytest.raises(MappingError, match="sequential/dense_2/bias"):
        raise MappingError(mapping)
    # `pgtwin compare --json`'s records: the five pairs, then the unpaired bias with its reason.
    records = mapping.to_records("trained")
    assert [r["tf1"] for r in records[:5]] == [p.tf1.name for p in mapping.pairs]
    assert records[5] == {"role": "trained", "unpaired": "TF2", "name": "sequential/dense_2/bias",
                          "shape": list(problem.variable.shape), "message": problem.message}


def test_without_order_unique_shapes_pair_and_equal_shapes_need_names():
    # Reversed TF2 order: the diff alignment pairs less than half, so order is not trusted.
    mapping = infer_mapping(TF1, KERAS[::-1])
    # (4,64), (64,64), (64,2), (2,) are unique by shape and kind; the two (64,) biases are
    # not, and their names (fc1/b vs dense/bias) do not say which is which.
    assert {p.tf1.name for p in mapping.pairs} == {"actor/fc1/W", "actor/fc2/W", "actor/out/W",
                                                   "actor/out/b"}
    ambiguous = [p for p in mapping.problems if p.side == "TF1"]
    assert [p.variable.name for p in ambiguous] == ["actor/fc1/b", "actor/fc2/b"]
    assert all("ambiguous" in p.message and "sequential/dense/bias (64,)" in p.message
               for p in ambiguous)


def test_names_decide_among_equal_shapes_when_they_say_the_same():
    tf1 = [V("fc1/weights", (8, 8)), V("fc2/weights", (8, 8))]
    tf2 = [V("model/fc2/kernel", (8, 8)), V("model/fc1/kernel", (8, 8))]
    mapping = infer_mapping(tf1, tf2, ordered=False)
    assert pairs(mapping) == [("fc1/weights", "model/fc1/kernel", "name"),
                              ("fc2/weights", "model/fc2/kernel", "name")]


def test_scopes_sharing_the_most_words_pair_equal_shapes_of_one_leaf():
    # A checkpoint's batch norm (fc1/bn/...) against Keras layers named fc1_bn: eight (64,)
    # variables of one kind, whose scopes share 3 words with their partner ({policy, fc1,
    # bn}) and 2 with the other layer's ({policy, bn}); the leaf must be the same.
    leaves = ["gamma", "beta", "moving_mean", "moving_variance"]
    tf1 = [V(f"policy/fc{i}/bn/{leaf}", (64,)) for i in (1, 2) for leaf in leaves]
    tf2 = [V(f"policy/fc{i}_bn/{leaf}", (64,)) for i in (2, 1) for leaf in leaves[::-1]]
    mapping = infer_mapping(tf1, tf2, ordered=False)
    assert mapping.ok, mapping.problems
    assert sorted((a, b) for a, b, _ in pairs(mapping)) == sorted(
        (f"policy/fc{i}/bn/{leaf}", f"policy/fc{i}_bn/{leaf}") for i in (1, 2) for leaf in leaves)
    # A tie in shared words pairs nothing: fc1 against dense and dense_1 (0 words each)
    tie = infer_mapping([V("actor/fc1/gamma", (4,))],
                        [V("dense/gamma", (4,)), V("dense_1/gamma", (4,))], ordered=False)
    assert not tie.pairs and "ambiguous" in tie.problems[0].message
    # compare's row says how to pair it by hand (only convert-checkpoint's said --map)
    from pgtwin.parity.code_parity import problem_row
    assert problem_row(tie.problems[0], "").note.endswith(
        "; pair them by hand: name_map={'TF1 name': 'TF2 name', ...} (pgtwin compare --map "
        "TF1_NAME=TF2_NAME, once for each)")


def test_a_batch_norm_without_gamma_leaves_beta_with_beta_and_says_scale_false():
    # tf_slim's batch_norm: beta only (scale=False); Keras' BatchNormalization: gamma and
    # beta. Both are (64,): by kind, beta pairs with beta and gamma is left, with the fix.
    tf1 = [V("model/fc1/weights", (4, 64)), V("model/fc1/BatchNorm/beta", (64,)),
           V("model/fc2/weights", (64, 64)), V("model/fc2/BatchNorm/beta", (64,))]
    tf2 = [V("fc1/kernel", (4, 64)), V("fc1_bn/gamma", (64,)), V("fc1_bn/beta", (64,)),
           V("fc2/kernel", (64, 64)), V("fc2_bn/gamma", (64,)), V("fc2_bn/beta", (64,))]
    mapping = infer_mapping(tf1, tf2)
    assert [(a, b) for a, b, _ in pairs(mapping)] == [
        ("model/fc1/weights", "fc1/kernel"), ("model/fc1/BatchNorm/beta", "fc1_bn/beta"),
        ("model/fc2/weights", "fc2/kernel"), ("model/fc2/BatchNorm/beta", "fc2_bn/beta")]
    assert [p.variable.name for p in mapping.problems] == ["fc1_bn/gamma", "fc2_bn/gamma"]
    assert all("build the Keras normalisation with scale=False" in p.message
               for p in mapping.problems)


def test_a_tf1_lstm_cells_one_kernel_is_explained_against_keras_two():
    # BasicLSTMCell over 3 inputs with 8 units: kernel [3 + 8, 32]; Keras' LSTM: kernel
    # [3, 32] and recurrent_kernel [8, 32]. Both have a bias of 32.
    tf1 = [V("rnn/basic_lstm_cell/kernel", (11, 32)), V("rnn/basic_lstm_cell/bias", (32,))]
    tf2 = [V("lstm/lstm_cell/kernel", (3, 32)), V("lstm/lstm_cell/recurrent_kernel", (8, 32)),
           V("lstm/lstm_cell/bias", (32,))]
    problem = next(p for p in infer_mapping(tf1, tf2).problems if p.side == "TF1")
    assert problem.variable.name == "rnn/basic_lstm_cell/kernel"
    assert "its first 3 rows act on the inputs, its last 8 on the state" in problem.message
    assert "TF1 i, j, f, o; Keras i, f, c, o" in problem.message


def test_name_map_overrides_the_inference_and_its_mistakes_are_named():
    mapping = infer_mapping(TF1[:2], KERAS[:2], {"actor/fc1/W": "sequential/dense/kernel"})
    assert pairs(mapping)[0] == ("actor/fc1/W", "sequential/dense/kernel", "name_map")
    wrong = infer_mapping(TF1[:2], KERAS[:2], {"actor/fc1/W": "sequential/dense/bias"})
    assert any("shapes differ" in p.message for p in wrong.problems)
    unknown = infer_mapping(TF1[:2], KERAS[:2], {"actor/fc9/W": "sequential/dense/kernel"})
    assert any("not compared" in p.message for p in unknown.problems)
    # A name that is no variable has no shape: "()" would read as a scalar variable, in the
    # text, the error and the JSON records alike.
    (missing,) = [p for p in unknown.problems if p.variable.name == "actor/fc9/W"]
    assert missing.described == "TF1 actor/fc9/W (no such variable)"
    assert "UNPAIRED TF1 actor/fc9/W (no such variable): name_map names" in unknown.to_table()
    assert "actor/fc9/W ()" not in str(MappingError(unknown))
    (record,) = [r for r in unknown.to_records("weights") if r.get("name") == "actor/fc9/W"]
    assert record["shape"] is None
    # a real unpaired variable keeps its shape
    extra = infer_mapping(TF1[:3], KERAS[:2])
    (fc2_w,) = [p for p in extra.problems if p.variable.name == "actor/fc2/W"]
    assert fc2_w.described == "TF1 actor/fc2/W (64, 64)"


# ------------------------------------------------------------------ initialisation
def test_ks_statistic_of_two_hand_made_samples():
    # F_a jumps at 0,1,2,3 (by 1/4), F_b at 2,3,4,5: at x = 1, F_a = 1/2 and F_b = 0, the
    # largest gap anywhere.
    assert ks_statistic(np.array([0, 1, 2, 3.0]), np.array([2, 3, 4, 5.0])) == pytest.approx(0.5)


def test_ks_pvalue_at_the_classic_five_percent_point():
    # Kolmogorov's distribution: Q(1.3581) = 0.05. With n = m = 20000, sqrt(ne) = 100 and
    # x = (100 + 0.12 + 0.0011) d, so d = 1.3581 / 100.1211 gives p = 0.05.
    d = 1.3581 / (100 + 0.12 + 0.11 / 100)
    assert ks_pvalue(d, 20000, 20000) == pytest.approx(0.05, abs=2e-4)


def test_variance_ratio_pvalue_against_the_delta_method_by_hand():
    # a: +-1 (kurtosis 1), scaled by 2 in b: log(var ratio) = log 4 and the variance of the
    # statistic is (kappa - 1)(...) = 0, floored at 1e-3 * (1/n + 1/n): p is 0.
    a = np.array([-1.0, 1.0] * 50)
    assert variance_ratio_pvalue(a, 2 * a) < 1e-12
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=4000), rng.normal(size=4000)
    # same distribution: z ~ N(0, 1), so p is not tiny
    assert variance_ratio_pvalue(x, y) > 1e-3


def test_initial_value_rows_constants_and_distributions():
    zeros = np.zeros((5, 3))
    assert initial_value_row("b", zeros, np.zeros(3), fail=True, context="").ok
    row = initial_value_row("b", zeros, np.full(3, 0.1), fail=True, context="")
    assert not row.ok and "constant" in row.note
    rng = np.random.default_rng(1)
    glorot = rng.uniform(-0.3, 0.3, size=(5, 64, 64))
    same = initial_value_row("k", glorot, rng.uniform(-0.3, 0.3, size=(64, 64)), True, "")
    assert same.ok and same.note.startswith(f"no difference found: KS D={same.max_abs:.3f} "
                                            "(the max_abs column)"), same.note
    # truncated-normal(0.1): std 0.088 vs the uniform's 0.3 / sqrt(3) = 0.17
    other = np.clip(rng.normal(0, 0.1, size=(64, 64)), -0.2, 0.2)
    warned = initial_value_row("k", glorot, other, False, "")
    assert warned.ok and warned.note.startswith("WARNING") and "std ratio" in warned.note
    assert math.isinf(warned.max_rel)


def test_a_seeded_tf1_initializers_repeated_draws_count_as_one():
    # A stateless initializer (tf_keras' with a seed) gives the same values at every run:
    # five copies of one draw hold no more evidence than the draw itself, so the row must be
    # the one-draw row (pooled, the KS test's n = 5m would shrink its p-value).
    rng = np.random.default_rng(2)
    draw, tf2 = rng.uniform(-0.3, 0.3, size=(8, 8)), rng.uniform(-0.3, 0.3, size=(8, 8))
    once = initial_value_row("k", draw[None], tf2, True, "")
    repeated = initial_value_row("k", np.stack([draw] * 5), tf2, True, "")
    assert repeated == once
    pooled = initial_value_row("k", np.concatenate([draw, draw + 1e-9]).reshape(2, 8, 8), tf2,
                               True, "")
    assert pooled != once  # draws that differ at all are pooled as before


def test_scoped_names_win_where_the_creation_order_would_cross_equal_shapes():
    # TF1 builds the actor's hidden layer before the critic's; the TF2 loss reads the critic
    # first. Both are (16, 16): by order alone actor_h would pair with critic_h.
    def net(prefix, first, second):
        names = [("embed", (4, 16)), (first, (16, 16)), (second, (16, 16)), ("pi", (16, 2))]
        return [VariableInfo(f"{prefix}{n}/{leaf}", shape if leaf == "kernel" else shape[1:])
                for n, shape in names for leaf in ("kernel", "bias")]
    tf1, tf2 = net("", "actor_h", "critic_h"), net("ac/", "critic_h", "actor_h")
    pairs = {p.tf1.name: (p.tf2.name, p.how) for p in infer_mapping(tf1, tf2).pairs}
    assert pairs["actor_h/kernel"] == ("ac/actor_h/kernel", "name (the creation order disagreed)")
    assert pairs["critic_h/bias"][0] == "ac/critic_h/bias"
    assert pairs["embed/kernel"] == ("ac/embed/kernel", "creation order and shape")
    # Where the order agrees with the names, it keeps its label.
    agreeing = infer_mapping(tf1, net("ac/", "actor_h", "critic_h")).pairs
    assert {p.how for p in agreeing} == {"creation order and shape"}


def test_a_bias_left_over_because_one_side_shares_a_layer_is_not_called_missing():
    # TF1 calls one torso twice (reuse=True); the migration built it twice. TF1's one bias
    # is paired, so the TF2 second bias is left: the other side *has* a bias of its shape.
    tf1 = [VariableInfo("torso/W", (4, 16)), VariableInfo("torso/b", (16,)),
           VariableInfo("pi/W", (16, 2)), VariableInfo("pi/b", (2,))]
    tf2 = [VariableInfo("torso/kernel", (4, 16)), VariableInfo("torso/bias", (16,)),
           VariableInfo("torso_b/kernel", (4, 16)), VariableInfo("torso_b/bias", (16,)),
           VariableInfo("pi/kernel", (16, 2)), VariableInfo("pi/bias", (2,))]
    problems = {p.variable.name: p.message for p in infer_mapping(tf1, tf2).problems}
    assert "use_bias=False" not in problems["torso_b/bias"]
    assert ("Every bias of shape (16,) on the other side is paired already (torso/b (16,)): "
            "if one side shares a layer (reuse=True, a Keras layer called twice)"
            ) in problems["torso_b/bias"]


def test_the_models_creation_order_serves_where_the_losss_read_order_crosses_equal_shapes():
    # Keras' default names say nothing (dense, dense_1 ...); the TF2 loss reads the value
    # MLP first, the model made the policy MLP first, as TF1 did. By the read order the
    # policy's 64 x 64 layer pairs with the value's.
    def info(name, shape):
        return VariableInfo(name, shape)
    tf1 = [info("pi/fc0/w", (4, 64)), info("pi/fc0/b", (64,)), info("pi/fc1/w", (64, 64)),
           info("pi/fc1/b", (64,)), info("vf/fc0/w", (4, 64)), info("vf/fc0/b", (64,)),
           info("vf/fc1/w", (64, 64)), info("vf/fc1/b", (64,)), info("pi/w", (64, 2)),
           info("pi/b", (2,)), info("vf/w", (64, 1)), info("vf/b", (1,))]
    made = [info(f"m/dense_{i // 2}/{'kernel' if i % 2 == 0 else 'bias'}", v.shape)
            for i, v in enumerate(tf1)]
    read = made[4:8] + made[0:4] + made[10:12] + made[8:10]  # the value net first
    by_read = {p.tf1.name: p.tf2.name for p in infer_mapping(tf1, read).pairs}
    assert by_read["pi/fc1/w"] != "m/dense_1/kernel"  # what the read order alone gives
    both = {p.tf1.name: p.tf2.name for p in infer_mapping(tf1, read, tf2_orders=[made]).pairs}
    assert both == {v.name: m.name for v, m in zip(tf1, made)}


def test_scopes_that_number_a_layer_differently_are_not_similar_names():
    # A checkpoint alone (no order): TF1's 1-based q/fc1..fc3 against Keras' 0-based
    # q/fc0..fc2, hidden layers all 32 x 32. Names pair fc1 and fc2 with their namesakes; the
    # leftover q/fc3 was then paired with q/fc0 as a "similar name" (both under q), and the
    # conversion went through scrambled. Numbered apart, it stays unpaired: --map is asked.
    tf1 = [VariableInfo(f"q/fc{i}/{leaf}", shape) for i in (1, 2, 3)
           for leaf, shape in (("W", (32, 32)), ("b", (32,)))]
    tf2 = [VariableInfo(f"q/fc{i}/{leaf}", shape) for i in (0, 1, 2)
           for leaf, shape in (("kernel", (32, 32)), ("bias", (32,)))]
    mapping = infer_mapping(tf1, tf2, ordered=False)
    assert not [p for p in mapping.pairs if p.how == "similar name"]
    assert {p.variable.name for p in mapping.problems} >= {"q/fc3/W", "q/fc0/kernel"}
    why = next(p.message for p in mapping.problems if p.variable.name == "q/fc3/W")
    assert why.startswith("q/fc0/kernel (32, 32) is the only TF2 kernel of this shape left, but "
                          "the two scopes number the layer differently"), why
    # fc1 under two scopes still says the same layer
    alike = infer_mapping([VariableInfo("actor/fc1/bn/gamma", (8,)),
                           VariableInfo("actor/fc2/bn/gamma", (8,))],
                          [VariableInfo("actor/fc1_bn/gamma", (8,)),
                           VariableInfo("actor/fc2_bn/gamma", (8,))], ordered=False)
    assert {(p.tf1.name, p.tf2.name) for p in alike.pairs} == {
        ("actor/fc1/bn/gamma", "actor/fc1_bn/gamma"), ("actor/fc2/bn/gamma", "actor/fc2_bn/gamma")}


def test_layers_counted_from_one_and_from_zero_pair_by_creation_order_whole():
    # With the creation order (a --tf1 program): TF1's 1-based pi/l1..l3 against a faithful
    # port's 0-based pi/l0..l2, hidden layers 64 x 64. Before, the names won where the order
    # "crossed" them: l2/W and l1/b, l2/b went to their namesakes and l3/W to l1/kernel by
    # order, so l1's kernel and bias were split between two Keras layers and l3/b was left
    # unpaired. Every numbered pair of the order is 1 apart, so the order is taken, whole,
    # and the table says why (by hand: l_k pairs with l_(k-1) for k = 1, 2, 3).
    tf1 = [V(f"pi/l{i}/{leaf}", shape) for i, width in ((1, 4), (2, 64), (3, 64))
           for leaf, shape in (("W", (width, 64)), ("b", (64,)))]
    tf1 += [V("pi/out/W", (64, 2)), V("pi/out/b", (2,))]
    tf2 = [V(f"pi/l{i}/{leaf}", shape) for i, width in ((0, 4), (1, 64), (2, 64))
           for leaf, shape in (("kernel", (width, 64)), ("bias", (64,)))]
    tf2 += [V("pi/out/kernel", (64, 2)), V("pi/out/bias", (2,))]
    mapping = infer_mapping(tf1, tf2)
    assert mapping.ok, mapping.to_table()
    want = {f"pi/l{k}/{a}": f"pi/l{k - 1}/{b}" for k in (1, 2, 3)
            for a, b in (("W", "kernel"), ("b", "bias"))}
    want.update({"pi/out/W": "pi/out/kernel", "pi/out/b": "pi/out/bias"})
    assert mapping.tf2_name() == want
    hows = {p.tf1.name: p.how for p in mapping.pairs}
    assert hows["pi/l2/W"] == "creation order and shape (the scopes count layers +1 apart)"
    assert hows["pi/out/W"] == "creation order and shape"
    # a shift that is not the same for every layer is no renumbering: the names still win
    # where the order would cross them (an actor-critic read critic first: shift 0 there)
    crossed = [V("actor/fc1/W", (8, 8)), V("critic/fc1/W", (8, 8))]
    read = [V("m/critic/fc1/kernel", (8, 8)), V("m/actor/fc1/kernel", (8, 8))]
    assert infer_mapping(crossed, read).tf2_name() == {
        "actor/fc1/W": "m/actor/fc1/kernel", "critic/fc1/W": "m/critic/fc1/kernel"}


def test_a_gru_bias_of_another_reset_after_names_reset_after_not_use_bias():
    # TF1's tf.keras GRU (reset_after=False): bias (3 units,); TF2's default
    # (reset_after=True): bias (2, 3 units). The kernels have the same shapes.
    tf1 = [V("rnn/gru/kernel", (4, 24)), V("rnn/gru/recurrent_kernel", (8, 24)),
           V("rnn/gru/bias", (24,))]
    tf2 = [V("gru/gru_cell/kernel", (4, 24)), V("gru/gru_cell/recurrent_kernel", (8, 24)),
           V("gru/gru_cell/bias", (2, 24))]
    mapping = infer_mapping(tf1, tf2)
    assert len(mapping.pairs) == 2 and len(mapping.problems) == 2
    for problem in mapping.problems:
        assert "reset_after=False" in problem.message and "use_bias" not in problem.message


def test_a_variable_shaped_otherwise_by_axes_of_size_one_is_named_with_the_shape_to_give():
    # a Gaussian head's free log_std: shape () in TF1, (1,) in the port
    tf1 = [VariableInfo("pi/w", (4, 1)), VariableInfo("pi/log_std", ())]
    tf2 = [VariableInfo("model/w", (4, 1)), VariableInfo("model/log_std", (1,))]
    mapping = infer_mapping(tf1, tf2)
    by_side = {p.side: p.message for p in mapping.problems}
    assert by_side["TF1"].endswith(
        ". TF2's model/log_std (1,) holds as many values in a shape that differs by axes of "
        "size 1 only: give the TF2 variable TF1's shape () (tf.Variable(0.0), "
        "add_weight(shape=()))")
    assert by_side["TF2"].endswith(
        ". TF1's pi/log_std () holds as many values in a shape that differs by axes of size 1 "
        "only: give the TF2 variable TF1's shape () (tf.Variable(0.0), add_weight(shape=()))")
    other = infer_mapping([VariableInfo("pi/log_std", (2,))], [VariableInfo("m/log_std", (3,))])
    assert "axes of size 1" not in other.problems[0].message


def _gru_variables(keras_bias: tuple[int, ...]) -> tuple[list, list]:
    """TF1 GRUCell(32) on 5 inputs, and Keras GRU(32) with a bias of ``keras_bias``."""
    cell = "rnn/gru_cell"
    tf1 = [VariableInfo(f"{cell}/gates/kernel", (37, 64)), VariableInfo(f"{cell}/gates/bias", (64,)),
           VariableInfo(f"{cell}/candidate/kernel", (37, 32)),
           VariableInfo(f"{cell}/candidate/bias", (32,))]
    tf2 = [VariableInfo("gru/kernel", (5, 96)), VariableInfo("gru/recurrent_kernel", (32, 96)),
           VariableInfo("gru/bias", keras_bias)]
    return tf1, tf2


def test_a_tf1_gru_cell_against_a_keras_gru_is_explained_not_told_use_bias():
    # TF1 GRUCell(32) on 5 inputs: gates/kernel [37, 64], candidate/kernel [37, 32] and their
    # biases; Keras GRU(32): kernel [5, 96], recurrent_kernel [32, 96], bias [96]. No bias
    # is missing on either side, so no use_bias note.
    mapping = infer_mapping(*_gru_variables((96,)))
    assert len(mapping.problems) == 7 and not mapping.pairs
    for p in mapping.problems:
        assert "One GRU of 32 units, laid out otherwise on each side" in p.message, p.message
        assert "use_bias" not in p.message
    text = mapping.problems[0].message
    assert "gates/kernel [37, 64]" in text and "kernel [5, 96]" in text
    assert "reset_after=False" in text and "pgtwin pairs one variable with one" in text
    # a dense layer's missing bias is still told use_bias
    plain = infer_mapping([VariableInfo("fc/w", (4, 8))],
                          [VariableInfo("d/kernel", (4, 8)), VariableInfo("d/bias", (8,))])
    assert "use_bias=False" in plain.problems[0].message


def test_a_keras_gru_left_at_reset_after_true_is_told_so_by_its_bias():
    # Keras GRU(32) with reset_after=True (the default) holds bias [2, 96] (input and
    # recurrent biases): the note said "one bias" and "bias = [u | r | candidate]", which
    # no [2, 96] bias can take; it now names the setting from that shape
    for p in infer_mapping(*_gru_variables((2, 96))).problems:
        assert "One GRU of 32 units: the Keras GRU's bias is [2, 96], so it has " \
               "reset_after=True (Keras' default)" in p.message, p.message
        assert "GRU(reset_after=False) (one bias of 96)" in p.message


def test_a_tf1_lstm_kernel_note_reads_forget_bias_as_the_cells_and_offers_a_hand_written_cell():
    mapping = infer_mapping([VariableInfo("rnn/lstm_cell/kernel", (21, 64)),
                             VariableInfo("rnn/lstm_cell/bias", (64,))],
                            [VariableInfo("lstm/kernel", (5, 64)),
                             VariableInfo("lstm/recurrent_kernel", (16, 64)),
                             VariableInfo("lstm/bias", (64,))])
    text = next(p.message for p in mapping.problems
                if p.variable.name == "rnn/lstm_cell/kernel")
    assert "the cell's forget_bias (1.0 unless the cell was given another)" in text
    assert "write the cell by hand with TF1's variables" in text


@pytest.mark.parametrize("tf1_kind,tf2_kind,family", [
    ("RandomStandardNormal", "TruncatedNormal({'mean': 0.0, 'stddev': 0.3})", "normal"),
    ("TruncatedNormal", "RandomUniform({'minval': -0.05})", "truncated normal"),
    ("Qr+RandomStandardNormal", "GlorotUniform({})", "orthogonal matrix"),
])
def test_initializers_of_two_kinds_are_named_though_the_tests_see_no_difference(
        tf1_kind, tf2_kind, family):
    # 30 values of N(0, 0.3) against 30 of a truncated normal with the same settings: the
    # KS and variance tests cannot tell them apart on a layer this small, and the row said
    # "same distribution"; the ops and the Keras initializer say which kinds they are.
    rng = np.random.default_rng(3)
    tf1_draws = rng.normal(0.0, 0.3, size=(5, 10, 3))
    tf2_value = rng.normal(0.0, 0.3, size=(10, 3))
    row = initial_value_row("fc2/kernel", tf1_draws, tf2_value, False, "", tf1_kind, tf2_kind)
    assert row.ok and row.note.startswith(
        f"WARNING initial values come from another kind of distribution: TF1 draws from a "
        f"{family} ({tf1_kind}), TF2 from a "), row.note
    failed = initial_value_row("fc2/kernel", tf1_draws, tf2_value, True, "", tf1_kind, tf2_kind)
    assert not failed.ok


def test_initializers_of_one_kind_are_left_to_the_tests():
    rng = np.random.default_rng(3)
    row = initial_value_row("k", rng.uniform(-0.3, 0.3, size=(5, 8, 8)),
                            rng.uniform(-0.3, 0.3, size=(8, 8)), True, "",
                            "RandomUniform", "GlorotUniform({'seed': None})")
    assert row.ok and row.note.startswith("no difference found")
    assert tf1_family("RandomUniform+TruncatedNormal") is None  # not one kind
    assert tf2_family("VarianceScaling({'distribution': 'untruncated_normal'})") == "normal"
    assert tf2_family("MyInit({})") is None


def test_a_dense_kernel_after_a_flatten_of_another_spatial_size_names_the_conv_sizes():
    # conv2 with 'valid' padding where TF1 has 'same': 4 x 4 x 32 = 512 flattened inputs
    # against TF1's 5 x 5 x 32 = 800
    tf1 = [VariableInfo("m/c2/kernel", (3, 3, 16, 32)), VariableInfo("m/fc1/kernel", (800, 64))]
    tf2 = [VariableInfo("c2/kernel", (3, 3, 16, 32)), VariableInfo("fc1/kernel", (512, 64))]
    problems = {p.variable.name: p.message for p in infer_mapping(tf1, tf2).problems}
    assert problems["m/fc1/kernel"].endswith(
        "m/fc1/kernel takes 800 = 5 x 5 x 32 inputs and fc1/kernel 512 = 4 x 4 x 32: the "
        "flattened output of a conv layer 5 x 5 in TF1 and 4 x 4 in TF2. Check the padding "
        "('same' or 'valid') and strides of the conv layers before it")
    # without a conv kernel, two MLP widths (64 = 4 x 4 x 4, 16 = 2 x 2 x 4) are no such case
    mlp = infer_mapping([VariableInfo("fc1/kernel", (64, 8))],
                        [VariableInfo("fc1/kernel", (16, 8))]).problems
    assert all("conv layer" not in p.message for p in mlp)


def test_a_free_log_std_against_a_dense_log_std_head_is_named():
    # TF1's state-independent log_std (4,) pairs with the port's head bias by shape; the
    # head's kernel is left, and its row now says why (it said only "no TF1 variable")
    tf1 = [VariableInfo("model/fc/w", (3, 64)), VariableInfo("model/fc/b", (64,)),
           VariableInfo("model/logstd", (4,))]
    tf2 = [VariableInfo("m/fc/kernel", (3, 64)), VariableInfo("m/fc/bias", (64,)),
           VariableInfo("m/pi_logstd/kernel", (64, 4)), VariableInfo("m/pi_logstd/bias", (4,))]
    mapping = infer_mapping(tf1, tf2)
    [problem] = mapping.problems
    assert problem.variable.name == "m/pi_logstd/kernel"
    assert "Its layer's bias m/pi_logstd/bias was paired with TF1's model/logstd (4,)" in \
        problem.message and "self.add_weight(shape=(4,))" in problem.message, problem.message


def test_a_gap_between_draws_of_one_kind_says_it_may_be_chance():
    # TF1's glorot_uniform_initializer (read as RandomUniform) against Keras' GlorotUniform:
    # one kind; draws whose spread differs get the tests' p and the chance, not the advice
    # to change the initializer (a helper's run warned at p = 3.6e-4 on a fluke)
    rng = np.random.default_rng(5)
    row = initial_value_row("k", rng.uniform(-0.3, 0.3, size=(5, 16, 16)),
                            rng.uniform(-0.2, 0.2, size=(16, 16)), False, "",
                            "RandomUniform", "GlorotUniform({'seed': None})")
    assert row.note.startswith("WARNING initial values come from another distribution")
    assert "both draw from a uniform, so this may be chance" in row.note
    assert "give the TF2 layer the TF1 initializer" not in row.note
