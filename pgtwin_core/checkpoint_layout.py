"""What an agent checkpoint holds, in the twins' shared terms, and whether it fits an agent.

Both twins' ``restore`` read their checkpoint's layout first (``legacy_graph/checkpoint_layout.py``
reads a TF1 ``Saver`` file, ``eager/checkpoint_layout.py`` a ``tf.train.Checkpoint``) and
compare it here with the layout the agent would write, before a single value is assigned.
A TF1 ``Saver`` alone restores a (4, 64) kernel into a (4, 32) variable without complaint
(docs/reliability.md), so the comparison cannot be left to TensorFlow; doing it in one
place gives both twins the same refusal with the same message.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pgtwin_core.config import ReinforceConfig
from pgtwin_core.errors import IncompatibleCheckpointError
from pgtwin_core.specs import PolicySpec
from pgtwin_core.value_spec import value_spec

Shape = tuple[int, ...]


@dataclass(frozen=True)
class CheckpointLayout:
    """The policy variables and the optimizer of an agent checkpoint."""

    variables: dict[str, tuple[Shape, str]]
    """Canonical name (``policy/dense_0/kernel``, ``value/...``) -> (shape, dtype name)."""
    optimizer: str
    """``adam`` (moment slots saved) or ``sgd`` (no slots)."""
    memory: dict[str, tuple[int | None, ...]] = field(default_factory=dict)
    """An episodic baseline's memory, field (``num``, ``den``, ``sum_r``, ``count``,
    ``horizon``) -> shape; ``None`` where the agent takes any size (``optimal_time``'s
    rows). Empty: none saved, or none kept by the agent's baseline."""


def agent_layout(spec: PolicySpec, config: ReinforceConfig) -> CheckpointLayout:
    """The layout an agent built from ``spec`` and ``config`` writes (and can restore): the
    policy's variables, and the value net's with ``baseline='value'``
    (``pgtwin_core.value_spec``; its optimizer is ``value_optimizer_config``'s)."""
    shapes = dict(spec.weight_shapes())
    if config.baseline == "value":
        shapes.update(value_spec(spec, config).variable_shapes())
    return CheckpointLayout(
        variables={name: (shape, config.dtype) for name, shape in shapes.items()},
        optimizer=config.optimizer)


def layout_problems(saved: CheckpointLayout, agent: CheckpointLayout) -> list[str]:
    """Every difference between a checkpoint's layout and an agent's, one phrase each."""
    problems = []
    for name, (shape, dtype) in agent.variables.items():
        if name not in saved.variables:
            problems.append(f"{name}: in the agent {_describe(shape, dtype)}, not in the checkpoint")
        elif saved.variables[name] != (shape, dtype):
            problems.append(f"{name}: checkpoint {_describe(*saved.variables[name])}, "
                            f"agent {_describe(shape, dtype)}")
    for name, (shape, dtype) in saved.variables.items():
        if name not in agent.variables:
            problems.append(f"{name}: in the checkpoint {_describe(shape, dtype)}, not in the agent")
    if saved.optimizer != agent.optimizer:
        problems.append(f"optimizer: checkpoint {saved.optimizer}, agent {agent.optimizer}")
    return problems + _memory_problems(saved.memory, agent.memory)


def _memory_problems(saved: dict, agent: dict) -> list[str]:
    """The baseline memory's differences. A checkpoint without memory fits any agent (one
    saved before the memory was the agent's: ``pgtwin train`` restores it from
    ``baseline_memory.npz``); memory saved for another baseline, or a policy of another
    size, does not."""
    if not saved:
        return []
    held = ", ".join(f"{k} {tuple(v)}" for k, v in sorted(saved.items()))
    if not agent:
        return [f"baseline_memory: in the checkpoint ({held}), not in the agent, whose "
                "baseline keeps none: restore into an agent built with the checkpoint's "
                "episodic baseline"]

    def fits(shape, want):
        return len(shape) == len(want) and all(w is None or s == w for s, w in zip(shape, want))
    if set(saved) == set(agent) and all(fits(saved[k], agent[k]) for k in agent):
        return []
    want = ", ".join(f"{k} {tuple('any' if d is None else d for d in v)}"
                     for k, v in sorted(agent.items()))
    return [f"baseline_memory: checkpoint {held}, agent {want} (a memory saved for another "
            "episodic baseline or policy size)"]


def check_layout(path: str, saved: CheckpointLayout, agent: CheckpointLayout) -> None:
    """Raise ``IncompatibleCheckpointError`` listing every difference, if there is one."""
    problems = layout_problems(saved, agent)
    if problems:
        raise IncompatibleCheckpointError(path, problems)


def _describe(shape: Shape, dtype: str) -> str:
    return f"{tuple(shape)} {dtype}"
