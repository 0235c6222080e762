"""The twin ladder's rows for the value baseline's network (``baseline='value'``).

The same rungs as the policy's (``pgtwin.parity.twin_parity``), on the value net both twins
build with their agent: variables (names, shapes, dtypes, values: exact), outputs (V on a
fixed batch), loss, gradients (of the value loss), weights after ``fit_steps`` optimizer
steps on that batch (Adam and SGD), and training: ``updates`` collect + update iterations
of both twins in lockstep (fit ``after`` and ``before``), whose policy and value weights
and metrics must agree. Tolerances are the policy ladder's (``RTOL``), except float32
Adam weights: ``ADAM_FLOAT32_STEP`` of the farthest k steps move a weight (``k * lr``).
TF1's fused ``ApplyAdam`` takes ``1 - beta2`` in float32 where Keras takes it in float64
(``pgtwin.parity.twin_parity``: 1.3e-5 relative in the second moment); for an element whose
gradient passes near zero during the steps, ``m / sqrt(v)`` is ill-conditioned and the
difference grows: measured 1.5e-3 of a step on the LSTM value kernel after 5 steps (the
same gradients at step 0, to every printed digit; float64 within 1e-9).
"""
from __future__ import annotations

import functools

import numpy as np

from pgtwin_core.config import DTYPES, ReinforceConfig
from pgtwin_core.rollout import Batch, collect
from pgtwin_core.specs import init_weights
from pgtwin_core.returns import discounted_returns
from pgtwin_core.value_path import ValueInputs

from pgtwin.parity.ladder import TWIN_SIDES, ParityReport, Row
from pgtwin.parity.ladder import compare_arrays as _compare_arrays
from pgtwin.parity.twin_parity import RTOL, TwinPair, fixed_batch, get_policy_kind

compare_arrays = functools.partial(_compare_arrays, sides=TWIN_SIDES)
""":func:`pgtwin.parity.ladder.compare_arrays`, its arrays the graph and eager twins'."""


ADAM_FLOAT32_STEP = 1e-2
"""float32 Adam weights agree to this fraction of ``k * lr`` (module doc)."""


def _weights_atol(config: ReinforceConfig, steps: int, lr: float) -> float:
    """The weights' absolute tolerance after ``steps`` steps at ``lr`` (module doc)."""
    factor = (ADAM_FLOAT32_STEP if config.dtype == "float32" and config.optimizer == "adam"
              else RTOL[config.dtype])
    return factor * steps * lr


def value_config(dtype: str, optimizer: str = "adam", **changes) -> ReinforceConfig:
    """A small value-baseline config with a time feature (horizon 200) and GPOMDP on."""
    base = dict(dtype=dtype, optimizer=optimizer, num_envs=4, num_steps=32, learning_rate=1e-2,
                baseline="value", value_learning_rate=1e-2, value_fit_steps=3,
                value_horizon=200, gpomdp=True, entropy_coef=0.01)
    return ReinforceConfig(**{**base, **changes})


def run_value_ladder(policy_kind: str, dtype: str, *, seed: int = 0, fit_steps: int = 5,
                     updates: int = 3, optimizers: tuple[str, ...] = ("adam", "sgd"),
                     fits: tuple[str, ...] = ("after", "before"),
                     eager_config: dict | None = None) -> ParityReport:
    """The value net's rungs for one policy kind and dtype (module doc); rows carry
    ``context = "<kind>/<dtype>/value[/<optimizer or fit>]"``.

    ``optimizers`` (each a pair of twins fitting the same fixed batch; the outputs, loss and
    gradients rungs come with the first) and ``fits`` (each a short training run, the value
    net fitted ``after`` or ``before`` the policy uses it) choose what is climbed: every one
    builds both twins anew, so a caller that needs fewer saves their build and compiles.
    ``eager_config``: changes to the eager twin's config only, as ``run_ladder``'s."""
    if not optimizers or not fits:
        raise ValueError(f"run_value_ladder: optimizers {optimizers!r} and fits {fits!r} "
                         "must each name at least one")
    kind = get_policy_kind(policy_kind)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")
    ctx = f"{kind.name}/{dtype}/value"
    spec = kind.spec()
    weights = init_weights(spec, seed, dtype=dtype)
    report = ParityReport()
    changes = dict(eager_config or {})
    for optimizer in optimizers:
        config = value_config(dtype, optimizer)
        pair = TwinPair(spec, config, weights, config.replace(**changes))
        try:
            batch = fixed_batch(kind, spec, pair.graph.dist_params, seed)
            fed = _fed(pair, batch)
            if optimizer == optimizers[0]:
                report.extend(compare_fixed(pair, fed, ctx))
            report.extend(compare_fit(pair, fed, fit_steps, f"{ctx}/{optimizer}"))
        finally:
            pair.close()
    for fit in fits:
        report.extend(compare_value_training(kind, spec, weights, dtype, seed, updates, fit,
                                             f"{ctx}/{fit}", changes))
    return report


def _fed(pair: TwinPair, batch: Batch) -> ValueInputs:
    config = pair.graph.config
    g = discounted_returns(batch.rewards, batch.terminated, batch.truncated, config.gamma)
    return ValueInputs(batch, config, pair.graph.spec, g)


def compare_fixed(pair: TwinPair, fed: ValueInputs, ctx: str) -> ParityReport:
    """Rungs 1-4 on the value net: variables (exact), V, the loss, its gradients."""
    graph, eager = pair.graph.value_net, pair.eager.value_net
    rtol = RTOL[pair.graph.config.dtype]
    report = ParityReport()
    g_w, e_w = graph.get_weights(), eager.get_weights()
    if list(g_w) != list(e_w):
        report.add(Row("variables", "value names", np.inf, np.inf, False,
                       f"graph {list(g_w)} vs eager {list(e_w)}", ctx))
    g_tf = {n: v.name.split(":")[0] for n, v in graph.all_variables.items()}
    e_tf = {n: v.name.split(":")[0] for n, v in eager.all_variables.items()}
    for name in g_w:
        row = compare_arrays("variables", name, g_w[name], e_w.get(name, np.full(1, np.nan)),
                             rtol=0.0, context=ctx)
        if g_tf[name] != e_tf.get(name) or g_w[name].dtype != e_w[name].dtype:
            row = Row("variables", name, row.max_abs, row.max_rel, False,
                      f"graph {g_tf[name]} {g_w[name].dtype} vs eager {e_tf.get(name)} "
                      f"{e_w[name].dtype}", ctx)
        report.add(row)
    report.add(compare_arrays("outputs", "value", graph.predict(fed.obs, fed.tau),
                              eager.predict(fed.obs, fed.tau), rtol, context=ctx))
    mean, std, args = fed.standardised()
    for net in (graph, eager):
        net.set_target_stats(mean, std)
    report.add(compare_arrays("outputs", "value (batch statistics)", graph.predict(fed.obs, fed.tau),
                              eager.predict(fed.obs, fed.tau), rtol, context=ctx))
    g_loss, g_grads = graph.loss_and_gradients(*args)
    e_loss, e_grads = eager.loss_and_gradients(*args)
    report.add(compare_arrays("loss", "value loss", g_loss, e_loss, rtol, context=ctx))
    report.extend(ParityReport([compare_arrays("gradients", name, g_grads[name], e_grads[name],
                                               rtol, context=ctx) for name in g_grads]))
    return report


def compare_fit(pair: TwinPair, fed: ValueInputs, steps: int, ctx: str) -> ParityReport:
    """Rung 5 on the value net: ``steps`` guarded optimizer steps on one batch; the losses
    along the way, then each variable."""
    graph, eager = pair.graph.value_net, pair.eager.value_net
    config = pair.graph.config
    rtol = RTOL[config.dtype]
    mean, std, args = fed.standardised()
    for net in (graph, eager):
        net.set_target_stats(mean, std)
    g_fit = [graph.fit_step(*args) for _ in range(steps)]
    e_fit = [eager.fit_step(*args) for _ in range(steps)]
    report = ParityReport()
    g_loss, e_loss = np.array([f[0] for f in g_fit]), np.array([f[0] for f in e_fit])
    report.add(compare_arrays("weights", f"value loss (steps 1-{steps})", g_loss, e_loss, rtol,
                              context=ctx))
    if [f[1] for f in g_fit] != [f[1] for f in e_fit] or not all(f[1] for f in g_fit):
        report.add(Row("weights", "value applied", np.inf, np.inf, False,
                       f"graph {[f[1] for f in g_fit]} vs eager {[f[1] for f in e_fit]}", ctx))
    g_w, e_w = graph.get_weights(), eager.get_weights()
    atol = _weights_atol(config, steps, config.value_learning_rate)
    report.extend(ParityReport([compare_arrays("weights", name, g_w[name], e_w[name], rtol,
                                               atol=atol, context=ctx) for name in g_w]))
    return report


def compare_value_training(kind, spec, weights, dtype: str, seed: int, updates: int, fit: str,
                           ctx: str, eager_changes: dict | None = None) -> ParityReport:
    """Rung 6 with the value baseline: ``updates`` iterations, each twin collecting its own
    batch with its own policy from the same seeds; metrics per update, then the policy's and
    the value net's weights. ``eager_changes``: to the eager twin's config only."""
    config = value_config(dtype, value_fit=fit)
    pair = TwinPair(spec, config, weights, config.replace(**(eager_changes or {})))
    rtol = RTOL[dtype]
    report = ParityReport()
    try:
        runs = {}
        for name, agent in (("graph", pair.graph), ("eager", pair.eager)):
            envs = kind.make_envs(config.num_envs, seed)
            rng, state, metrics = np.random.default_rng(seed), None, []
            try:
                for _ in range(updates):
                    batch, state = collect(envs, agent.rollout_policy(), spec, config.num_steps,
                                           rng, state)
                    metrics.append(agent.update(batch))
            finally:
                envs.close()
            runs[name] = metrics
        for key in ("loss", "grad_norm", "value_loss", "value_loss_after_fit"):
            g = np.array([m[key] for m in runs["graph"]])
            e = np.array([m[key] for m in runs["eager"]])
            report.add(compare_arrays("training", f"metric {key} (updates 1-{updates})", g, e,
                                      rtol, atol=rtol * float(np.max(np.abs(g))), context=ctx))
        steps = updates * config.value_fit_steps
        for g_w, e_w, lr, k in (
                (pair.graph.get_weights(), pair.eager.get_weights(), config.learning_rate,
                 updates),
                (pair.graph.value_net.get_weights(), pair.eager.value_net.get_weights(),
                 config.value_learning_rate, steps)):
            report.extend(ParityReport([
                compare_arrays("training", name, g_w[name], e_w[name], rtol,
                               atol=_weights_atol(config, k, lr), context=ctx) for name in g_w]))
    finally:
        pair.close()
    return report
