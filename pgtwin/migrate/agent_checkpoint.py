"""TF1 ``Saver`` checkpoints -> TF2 ``tf.train.Checkpoint``\\ s the eager twin restores.

A TF1 checkpoint is a flat ``{name: array}`` table (``tf.train.load_checkpoint``): the
policy's variables, the optimizer's slots (``<var>/Adam`` = m, ``<var>/Adam_1`` = v for
Adam) and non-slot variables (``beta1_power``, ``beta2_power`` = beta^(t+1) after t steps).
A TF2 checkpoint is object-based: values are found by the path from the root object
(``optimizer/_variables/3/...``), so it can only be written by building the objects. The
conversion therefore builds ``eager.agent.ReinforceAgent`` (whose checkpoint is
``tf.train.Checkpoint(policy=PolicyVariables, optimizer=keras optimizer)``), assigns it the
converted values and lets it write itself; that makes the result restorable by
``ReinforceAgent.restore`` by construction.

Names: the policy's canonical names (``policy/dense_0/kernel`` ...) are what
``legacy_graph`` saves; a user's graph is renamed with ``name_map`` (``{old: new}``; an
``old`` ending in ``/`` renames a whole scope). Slots follow their variable.

Spec: a checkpoint holds shapes, not the network's activation, squash or history length.
The torso (``lstm`` if ``policy/lstm/kernel``), hidden sizes, observation and action sizes,
distribution (``gaussian`` if ``policy/log_std``) and dtype are read from the shapes; an
``env_id`` supplies the spaces (checked against the shapes: action bounds and squash for a
Gaussian), ``activation`` and ``history`` the rest. None of those are stored in the
TF2 checkpoint either, so they only shape the verification, in which both sides use them.

Optimizer state (``optimizer_state``): ``auto`` converts Adam's state when the checkpoint
has it (m, v per variable and the beta powers, from which Keras' ``iterations`` = t is
solved), else starts fresh; ``convert`` requires it; ``reset`` drops it. Other optimizers'
slots (Momentum, RMSProp) are not converted: ``reset``, or ``drop`` them.

Verification before anything is written: the legacy twin loaded from the TF1 values
(weights, and Adam's m, v and beta powers as stored) and the eager twin restored from the
written TF2 checkpoint must hold the same variables (exactly), give the same distribution
parameters on sample observations, and take the same optimizer steps on the same random
gradients. The checkpoint is written into a temporary directory beside ``dst`` and
renamed into place only after that; on any error nothing is left at ``dst``.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

import numpy as np

from eager.agent import ReinforceAgent as EagerAgent
from legacy_graph.agent import ReinforceAgent as LegacyAgent
from pgtwin_core.config import DTYPES, ReinforceConfig
from pgtwin_core.specs import PolicySpec, spec_for_env
from pgtwin.migrate.checkpoint_prefix import refuse_existing, staged_prefix
from pgtwin.migrate.optimizer_states import OPTIMIZER_STATES
from pgtwin.migrate.keras_adam_state import adam_slots as keras_adam_slots
from pgtwin.parity.ladder import ParityReport, compare_arrays
from pgtwin.parity.parity_rows import DEFAULT_TOLERANCES
from pgtwin.migrate.tf1_checkpoint import (adam_pair, adam_step_count, load_tf1_adam, power_key,
                                           read_tf1_checkpoint, slot_parents)

_DENSE = re.compile(r"^policy/dense_(\d+)/(kernel|bias)$")


class CheckpointMismatchError(ValueError):
    """The checkpoint's variables do not fit the policy: every problem listed at once."""

    def __init__(self, src: str, missing=(), extra=(), wrong=(), other=()):
        self.missing, self.extra, self.wrong = list(missing), list(extra), list(wrong)
        problems = list(other)
        if self.missing:
            problems.append(f"missing {self.missing}")
        if self.extra:
            problems.append(f"extra {self.extra} (drop them if they are not the policy's, "
                            "or rename them with a map OLD=NEW)")
        if self.wrong:
            problems.append("wrongly shaped " + "; ".join(self.wrong))
        super().__init__(f"checkpoint {src} does not fit the policy: " + "; ".join(problems)
                         + ". Nothing was written.")


class ConversionVerificationError(RuntimeError):
    """The written TF2 checkpoint did not reproduce the TF1 one (the report says where)."""

    def __init__(self, report: ParityReport):
        self.report = report
        super().__init__("the converted checkpoint does not reproduce the TF1 one; nothing "
                         "was written\n" + report.to_table())


@dataclass
class Conversion:
    """What :func:`convert_checkpoint` wrote and how it checked it."""

    dst: str
    """The TF2 checkpoint prefix written (``ReinforceAgent.restore(dst)`` reads it)."""
    spec: PolicySpec
    """The policy the checkpoint fits (shapes from the checkpoint, the rest as given)."""
    config: ReinforceConfig
    """Optimizer and dtype the eager agent restoring it must be built with."""
    renamed: dict[str, str]
    """TF1 name -> canonical name, for every policy variable."""
    optimizer_state: str
    """``adam`` (m, v and iterations converted) or ``fresh``."""
    iterations: int
    """Optimizer steps taken before the checkpoint (Keras ``iterations``)."""
    dropped: list[str] = field(default_factory=list)
    """TF1 names left out on purpose (``drop`` or ``optimizer_state='reset'``)."""
    report: ParityReport = field(default_factory=ParityReport)
    """The verification ladder (variables, outputs, weights), all passed."""
    notes: list[str] = field(default_factory=list)
    """What was converted beyond a copy (a TF1 LSTM cell's gate layout), for the user."""


# ------------------------------------------------------------------- reading
def parse_map(items: list[str] | None) -> dict[str, str]:
    """``["OLD=NEW", ...]`` -> ``{OLD: NEW}`` (a trailing ``/`` on both renames a scope)."""
    out = {}
    for item in items or []:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--map {item!r} is not OLD=NEW")
        if old.endswith("/") != new.endswith("/"):
            raise ValueError(f"--map {item!r}: a scope (trailing '/') maps to a scope")
        out[old] = new
    return out


def _rename(name: str, name_map: dict[str, str]) -> tuple[str, str | None]:
    """``(new name, the map key used or None)``: an exact entry first, then the longest scope."""
    if name in name_map:
        return name_map[name], name
    scopes = [k for k in name_map if k.endswith("/") and name.startswith(k)]
    if scopes:
        key = max(scopes, key=len)
        return name_map[key] + name[len(key):], key
    return name, None


def _dropped(name: str, drop: list[str]) -> bool:
    return any(name == d or (d.endswith("/") and name.startswith(d)) for d in drop)


@dataclass
class _Parts:
    policy: dict[str, np.ndarray]          # canonical name -> value
    renamed: dict[str, str]                # TF1 name -> canonical name
    slots: dict[str, dict[str, np.ndarray]]  # canonical name -> {slot suffix: value}
    powers: dict[str, np.ndarray]          # "beta1"/"beta2" -> value
    dropped: list[str]
    problems: list[str]


def split_checkpoint(values: dict[str, np.ndarray], name_map: dict[str, str],
                     drop: list[str]) -> _Parts:
    """Sort TF1 names into policy variables (renamed), their slots and Adam's beta powers.

    A name ``<var>/<suffix>`` whose ``<var>`` is also in the checkpoint with the same shape
    is a slot of it (``Adam``, ``Adam_1``, ``Momentum`` ...).
    """
    dropped = [n for n in values if _dropped(n, drop)]
    kept = {n: v for n, v in values.items() if n not in dropped}
    problems = [f"--drop {d!r} matches no variable" for d in drop
                if not any(_dropped(n, [d]) for n in values)]
    powers, power_names = {}, {}
    for name, value in kept.items():
        key = power_key(name)
        if key:
            power_names.setdefault(key, []).append(name)
            powers[key] = value
    slot_of = slot_parents({n: v.shape for n, v in kept.items()})
    for key, names in power_names.items():
        if len(names) > 1:
            problems.append(f"several {key}_power variables {names} (several Adam optimizers?): "
                            "drop the ones not training the policy")
    policy, renamed, used = {}, {}, set()
    for name, value in kept.items():
        if name in slot_of or power_key(name):
            continue
        new, key = _rename(name, name_map)
        if key is not None:
            used.add(key)
        if new in policy:
            problems.append(f"{name!r} and another variable are both renamed to {new!r}")
        policy[new], renamed[name] = value, new
    problems += [f"--map {k}={name_map[k]}: no variable in the checkpoint matches {k!r}"
                 for k in name_map if k not in used]
    slots: dict[str, dict[str, np.ndarray]] = {}
    for name, (base, suffix) in slot_of.items():
        slots.setdefault(renamed[base], {})[suffix] = kept[name]
    return _Parts(policy, renamed, slots, powers, dropped, problems)


# ------------------------------------------------------------- TF1 LSTM cells
TF1_CELLS = ("/lstm_cell/", "/basic_lstm_cell/")
"""Scopes of TF1's ``tf.compat.v1.nn.rnn_cell.LSTMCell`` and ``BasicLSTMCell`` variables
(``rnn/lstm_cell/kernel``): one fused kernel ``[inputs + units, 4 units]`` with the gates in
the order i, j, f, o, and a ``forget_bias`` (1.0 by default) added to f when the cell runs,
not stored. pgtwin's LSTM (``pgtwin.mode_agnostic.forward_pass.lstm_steps``) orders them
i, f, g (TF1's j), o, with the whole bias stored."""


def tf1_cell_source(parts: _Parts) -> str | None:
    """The TF1 name renamed to ``policy/lstm/kernel`` when it is a TF1 LSTM cell's (a
    :data:`TF1_CELLS` scope, and no Keras ``recurrent_kernel`` beside it), else None."""
    for old, new in parts.renamed.items():
        scoped = "/" + old
        if new == "policy/lstm/kernel" and any(c in scoped for c in TF1_CELLS) and \
                old.rsplit("/", 1)[0] + "/recurrent_kernel" not in parts.renamed:
            return old
    return None


def _gates_as_pgtwins(x: np.ndarray) -> np.ndarray:
    """The last axis ``[i, j, f, o]`` (TF1's cell) as ``[i, f, j, o]`` (pgtwin's i, f, g, o)."""
    i, j, f, o = np.split(x, 4, axis=-1)
    return np.concatenate([i, f, j, o], axis=-1)


def from_tf1_cell(parts: _Parts, forget_bias: float) -> None:
    """``parts``' LSTM kernel and bias, with their slots, in pgtwin's gate order, and
    ``forget_bias`` added to the forget gate's stored bias (:data:`TF1_CELLS`). Adam's m and v
    are per element: they move with their columns and take no bias."""
    for name in ("policy/lstm/kernel", "policy/lstm/bias"):
        if name not in parts.policy:
            continue
        parts.policy[name] = _gates_as_pgtwins(parts.policy[name])
        for suffix, value in parts.slots.get(name, {}).items():
            parts.slots[name][suffix] = _gates_as_pgtwins(value)
    bias = parts.policy.get("policy/lstm/bias")
    if bias is not None:
        units = bias.shape[-1] // 4
        bias = bias.copy()
        bias[units:2 * units] += bias.dtype.type(forget_bias)
        parts.policy["policy/lstm/bias"] = bias


# ---------------------------------------------------------------------- spec
def infer_spec(policy: dict[str, np.ndarray], src: str, env_id: str | None = None,
               activation: str = "tanh", history: int = 1) -> PolicySpec:
    """The :class:`PolicySpec` the canonical ``policy`` values fit, checked name by name.

    Raises :class:`CheckpointMismatchError` listing missing, extra and misshapen variables.
    """
    shapes = {n: tuple(v.shape) for n, v in policy.items()}
    if "policy/head/kernel" not in shapes:
        raise CheckpointMismatchError(src, missing=["policy/head/kernel"], extra=[
            n for n in shapes if not n.startswith("policy/")], other=[
            f"found {sorted(shapes)}; rename the policy's variables to the canonical names "
            "(policy/dense_<i>/kernel|bias, policy/head/kernel|bias, policy/log_std, "
            "policy/lstm/kernel|bias) with OLD=NEW maps"])
    layers = sorted({int(m.group(1)) for n in shapes if (m := _DENSE.match(n))})
    count = layers[-1] + 1 if layers else 0
    sizes, missing = [], []
    for i in range(count):
        kernel, bias = shapes.get(f"policy/dense_{i}/kernel"), shapes.get(f"policy/dense_{i}/bias")
        if kernel is None and bias is None:
            missing += [f"policy/dense_{i}/kernel", f"policy/dense_{i}/bias"]
        else:
            sizes.append(kernel[-1] if kernel else bias[0])
    if missing:
        raise CheckpointMismatchError(src, missing=missing)
    head = shapes["policy/head/kernel"]
    if "policy/lstm/kernel" in shapes:
        units = shapes["policy/lstm/kernel"][-1] // 4
        obs_dim = shapes["policy/lstm/kernel"][0] - units
        torso, hidden, obs_shape = "lstm", (units, *sizes), (history, obs_dim)
    else:
        obs_dim = shapes["policy/dense_0/kernel"][0] if "policy/dense_0/kernel" in shapes else head[0]
        torso, hidden, obs_shape = "mlp", tuple(sizes), (obs_dim,)
    distribution = "gaussian" if "policy/log_std" in shapes else "categorical"
    try:
        spec = PolicySpec(distribution, obs_shape, head[-1], torso=torso, hidden=hidden,
                          activation=activation)
        if env_id is not None:
            spec = _spec_from_env(env_id, spec)
    except ValueError as err:
        raise CheckpointMismatchError(src, other=[f"no policy fits these shapes: {err}"]) from None
    expected = spec.weight_shapes()
    raise_on_mismatch(src, expected, shapes)
    return spec


def _spec_from_env(env_id: str, inferred: PolicySpec) -> PolicySpec:
    """``inferred``'s torso and sizes on ``env_id``'s spaces (bounds and squash from the env)."""
    import gymnasium

    env = gymnasium.make(env_id)
    try:
        flat = spec_for_env(env, torso="mlp", hidden=inferred.dense_sizes or (1,),
                            activation=inferred.activation)
    finally:
        env.close()
    obs_shape = (inferred.history, flat.obs_dim) if inferred.torso == "lstm" else flat.obs_shape
    return dataclasses.replace(flat, torso=inferred.torso, hidden=inferred.hidden, obs_shape=obs_shape)


def raise_on_mismatch(src: str, expected: dict[str, tuple], shapes: dict[str, tuple]) -> None:
    """Raise :class:`CheckpointMismatchError` unless ``shapes`` has exactly ``expected``'s names and shapes."""
    missing = [n for n in expected if n not in shapes]
    extra = [n for n in shapes if n not in expected]
    wrong = [f"{n}: expected {expected[n]}, got {shapes[n]}"
             for n in expected if n in shapes and shapes[n] != expected[n]]
    if missing or extra or wrong:
        raise CheckpointMismatchError(src, missing, extra, wrong)


# ----------------------------------------------------------- optimizer state
def adam_slots(parts: _Parts, spec: PolicySpec, src: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{canonical name: (m, v)}`` from the slot pairs ``S`` and ``S_1`` of every variable."""
    out, problems = {}, []
    for name in spec.weight_shapes():
        slots = parts.slots.get(name, {})
        pair = adam_pair(slots)
        if pair is None:
            problems.append(f"{name}: slots {sorted(slots)} are not one Adam pair (S, S_1)")
        else:
            out[name] = pair
    if set(parts.powers) != {"beta1", "beta2"}:
        problems.append(f"beta powers: found {sorted(parts.powers)}, need beta1 and beta2")
    if problems:
        raise CheckpointMismatchError(src, other=problems + [
            "only Adam's state converts; reset the optimizer state to start it fresh"])
    return out


# ------------------------------------------------------------------- convert
def convert_checkpoint(
    src: str,
    dst: str,
    name_map: dict[str, str] | None = None,
    drop: list[str] | None = None,
    env_id: str | None = None,
    activation: str = "tanh",
    history: int = 1,
    config: ReinforceConfig = ReinforceConfig(),
    optimizer_state: str = "auto",
    overwrite: bool = False,
    num_obs: int = 64,
    seed: int = 0,
    forget_bias: float = 1.0,
) -> Conversion:
    """Convert the TF1 checkpoint ``src`` into the eager twin's TF2 checkpoint at prefix ``dst``.

    Args:
      src: TF1 ``Saver`` checkpoint prefix (or its directory).
      dst: prefix of the TF2 checkpoint to write (``dst.index``, ``dst.data-*``).
      name_map: ``{TF1 name or scope/: canonical name or scope/}``.
      drop: TF1 names (or scopes ending in ``/``) to leave out, e.g. ``global_step``.
      env_id, activation, history: what the shapes cannot say (see the module docstring).
      config: the eager agent's optimizer hyperparameters (its learning rate is stored in
        the checkpoint and *replaces* that of the agent restoring it, as Keras does); the
        dtype is the checkpoint's.
      optimizer_state: ``auto``, ``convert`` or ``reset``.
      overwrite: replace an existing checkpoint at ``dst``.
      num_obs, seed: the sample observations (standard normal) and random gradients of
        the verification.
      forget_bias: the ``forget_bias`` of a TF1 ``LSTMCell`` / ``BasicLSTMCell`` in ``src``
        (:data:`TF1_CELLS`; a checkpoint does not store it), added to the forget gate's bias
        as its gates are put in pgtwin's order; unused for any other checkpoint.

    Raises:
      CheckpointMismatchError: missing, extra or wrongly shaped variables (all listed).
      ConversionVerificationError: the written checkpoint does not reproduce ``src``.
      FileExistsError: ``dst`` exists and ``overwrite`` is False.
    """
    if optimizer_state not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer_state={optimizer_state!r} is not one of {OPTIMIZER_STATES}")
    dst = os.path.abspath(dst)
    refuse_existing(dst, overwrite)

    parts = split_checkpoint(read_tf1_checkpoint(src), dict(name_map or {}), list(drop or []))
    if parts.problems:
        raise CheckpointMismatchError(src, other=parts.problems)
    notes, cell = [], tf1_cell_source(parts)
    if cell is not None:
        from_tf1_cell(parts, forget_bias)
        notes.append(f"{cell} is a TF1 LSTM cell's kernel: its gates i, j, f, o were put in "
                     f"pgtwin's order i, f, g, o and forget_bias {forget_bias:g} (the cell's, "
                     "not stored in checkpoints) added to the forget gate's bias; pass "
                     "--forget-bias if the cell was built with another")
    spec = infer_spec(parts.policy, src, env_id, activation, history)
    dtype = parts.policy["policy/head/kernel"].dtype.name
    if dtype not in DTYPES:
        raise CheckpointMismatchError(src, other=[f"the policy is {dtype}, not one of {DTYPES}"])
    config = config.replace(dtype=dtype)
    has_state = bool(parts.slots or parts.powers)
    if optimizer_state == "reset" or (optimizer_state == "auto" and not has_state):
        dropped = parts.dropped + [old for old in _state_names(parts)]
        slots, steps = None, 0
    else:
        if config.optimizer != "adam":
            raise CheckpointMismatchError(src, other=[
                f"the checkpoint holds optimizer state but the target optimizer is "
                f"{config.optimizer!r}: convert to adam, or reset the optimizer state"])
        slots = adam_slots(parts, spec, src)
        steps = adam_step_count(float(parts.powers["beta1"]), float(parts.powers["beta2"]),
                                config.adam_beta1, config.adam_beta2)
        dropped = parts.dropped

    weights = {n: parts.policy[n] for n in spec.weight_shapes()}
    eager = EagerAgent(spec, config, weights=weights)
    _load_keras_state(eager, slots, steps)
    with staged_prefix(dst, overwrite) as staged:
        written = eager.save(staged)
        report = verify_conversion(written, spec, config, weights, slots, parts.powers, steps,
                                   num_obs, seed)
        if not report.ok:
            raise ConversionVerificationError(report)
    return Conversion(dst, spec, config, {o: n for o, n in parts.renamed.items() if n in weights},
                      "adam" if slots else "fresh", steps, dropped, report, notes)


def _state_names(parts: _Parts) -> list[str]:
    """The TF1 names of the optimizer state (slots and powers) being left out."""
    back = {new: old for old, new in parts.renamed.items()}
    names = [f"{back.get(var, var)}/{s}" for var, slots in parts.slots.items() for s in slots]
    return names + [f"{k}_power" for k in parts.powers]


def _load_keras_state(agent: EagerAgent, slots, steps: int) -> None:
    """Assign Adam's m, v (by variable) and ``iterations`` to the eager agent's Keras optimizer."""
    if slots is None:
        return
    opt = agent.optimizer
    for name, var in agent.variables.items():
        m_slot, v_slot = keras_adam_slots(opt, var)
        m_slot.assign(slots[name][0])
        v_slot.assign(slots[name][1])
    opt.iterations.assign(steps)


def _load_tf1_state(agent: LegacyAgent, slots, powers: dict[str, np.ndarray]) -> None:
    """Load m, v and the beta powers *as stored* into the legacy twin's TF1 Adam."""
    if slots is None:
        return
    with agent.graph.as_default():
        load_tf1_adam(agent.optimizer, agent.variables, slots, powers["beta1"], powers["beta2"],
                      agent.session)


def verify_conversion(path: str, spec: PolicySpec, config: ReinforceConfig,
                      weights: dict[str, np.ndarray], slots, powers: dict[str, np.ndarray],
                      steps: int, num_obs: int = 64, seed: int = 0) -> ParityReport:
    """The TF1 values in the legacy twin vs the eager twin restored from ``path``.

    Rungs: ``variables`` (restored weights, m, v and iterations equal to the TF1 values,
    exactly), ``outputs`` (distribution parameters on ``num_obs`` standard-normal
    observations), ``weights`` (after two optimizer steps on the same random gradients,
    which exercises the converted m, v and t).
    """
    rtol, atol = DEFAULT_TOLERANCES[config.dtype][None]
    w_rtol, w_atol = DEFAULT_TOLERANCES[config.dtype].get("weights", (rtol, atol))
    report = ParityReport()
    restored = EagerAgent(spec, config, seed=seed + 1)  # other initial values: all must be replaced
    restored.restore(path)
    legacy = LegacyAgent(spec, config, weights=weights)
    try:
        _load_tf1_state(legacy, slots, powers)
        for name, value in restored.get_weights().items():
            report.add(compare_arrays("variables", name, weights[name], value, 0.0))
        if slots is not None:
            opt = restored.optimizer
            for name, var in restored.variables.items():
                m_slot, v_slot = keras_adam_slots(opt, var)
                report.add(compare_arrays("variables", f"{name}/m", slots[name][0],
                                          m_slot.numpy(), 0.0))
                report.add(compare_arrays("variables", f"{name}/v", slots[name][1],
                                          v_slot.numpy(), 0.0))
        report.add(compare_arrays("variables", "optimizer/iterations", np.asarray(steps),
                                  restored.optimizer.iterations.numpy(), 0.0))
        rng = np.random.default_rng(seed)
        obs = rng.standard_normal((num_obs, *spec.obs_shape)).astype(config.dtype)
        report.add(compare_arrays("outputs", "dist_params", legacy.dist_params(obs),
                                  restored.dist_params(obs), rtol, atol))
        for _ in range(2):
            grads = {n: rng.standard_normal(w.shape).astype(config.dtype) * 0.1
                     for n, w in weights.items()}
            legacy.apply_gradients(grads)
            restored.apply_gradients(grads)
        after = legacy.get_weights()
        for name, value in restored.get_weights().items():
            report.add(compare_arrays("weights", name, after[name], value, w_rtol, w_atol,
                                      "after 2 steps"))
    finally:
        legacy.close()
    return report
