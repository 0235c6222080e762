"""What an agent checkpoint holds, in the twins' shared terms, and whether it fits an agent.

Both twins' ``restore`` read their checkpoint's layout first (``legacy_graph/checkpoint_layout.py``
reads a TF1 ``Saver`` file, ``eager/checkpoint_layout.py`` a ``tf.train.Checkpoint``) and
compare it here with the layout the agent would write, before a single value is assigned.
A TF1 ``Saver`` alone restores a (4, 64) kernel into a (4, 32) variable without complaint
(docs/reliability.md), so the comparison cannot be left to TensorFlow; doing it in one
place gives both twins the same refusal with the same message.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    return problems


def check_layout(path: str, saved: CheckpointLayout, agent: CheckpointLayout) -> None:
    """Raise ``IncompatibleCheckpointError`` listing every difference, if there is one."""
    problems = layout_problems(saved, agent)
    if problems:
        raise IncompatibleCheckpointError(path, problems)


def _describe(shape: Shape, dtype: str) -> str:
    return f"{tuple(shape)} {dtype}"
