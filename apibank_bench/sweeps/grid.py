"""A sweep's grid: its axes and its cells.

A comma-separated value of a run setting is an axis; the grid is every combination of the axes,
in the order of the settings table. List settings (`base_url`, `only`: their values are comma
separated already), switches and JSON objects (`extra_body`) are never axes. Every combination is
run, also where an axis changes nothing (the team size of `single`): such cells repeat a run,
and with the response cache on they cost no model calls. Each cell is an ordinary results folder,
`DIR/<axis=value,...>`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from apibank_bench.core import settings


class SweepError(ValueError):
    """A bad grid or a cell folder that belongs to another run (usage: exit 2)."""


def can_be_axis(setting: settings.Setting) -> bool:
    return not (setting.many or setting.flag or setting.parse is settings.parse_json_object)


#: The axis separator of a repeatable list setting (`--model-role`), whose values hold commas themselves.
LIST_AXIS = ";"


def axis_values(setting: settings.Setting, raw: Any) -> list[str] | None:
    """The values of an axis in `raw` (None: not an axis): comma separated, or for a repeatable list
    setting `;` separated (each alternative a list of its own: `final=B@URL;-`)."""
    if setting.repeat:
        text = " ".join(raw) if isinstance(raw, (list, tuple)) else str(raw)
        return [value.strip() for value in text.split(LIST_AXIS)] if LIST_AXIS in text else None
    if not can_be_axis(setting) or "," not in str(raw):
        return None
    return [value.strip() for value in str(raw).split(",")]


def axis_label(name: str, value: str) -> str:
    """An axis value as a cell's label and folder show it: a role's model without its endpoint (operational)."""
    if not settings.BY_NAME[name].repeat or name != "model_role":
        return value
    try:
        parts = [settings.model_role_parts(item) for item in settings.parse_model_roles(value)]
    except ValueError:
        return value  # resolving the cell names the bad value

    return " ".join(f"{role}={model}" for role, model, _ in parts) or settings.NO_ROLE_MODELS


def axes_of(given: Mapping[str, Any]) -> dict[str, list[str]]:
    """{setting name: its values} for each given value with a comma (`;` for `--model-role`), in the table's order."""
    axes = {}
    for setting in settings.RUN_SETTINGS:
        raw = given.get(setting.name)
        values = None if raw is None else axis_values(setting, raw)
        if values is None:
            continue
        if "" in values:
            raise SweepError(f"--{setting.name.replace('_', '-')} {raw}: an empty value in the axis")
        if len(set(values)) < len(values):
            raise SweepError(f"--{setting.name.replace('_', '-')} {raw}: a value repeats in the axis")
        axes[setting.name] = values
    return axes


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")


@dataclass
class Cell:
    values: dict[str, str]  #: this cell's value of each axis
    given: dict[str, Any]  #: every setting's raw value for this cell (None = not given)
    path: Path
    cfg: Any = None  #: its resolved settings (a RunConfig)
    resume: bool = False
    skip: bool = False
    summary: dict | None = field(default=None, repr=False)
    job: str | None = None  #: "STATE job-id" of a job that holds the cell (queued or running)

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={axis_label(name, value)}" for name, value in self.values.items()) or "(no axes)"


def folder_name(values: Mapping[str, str]) -> str:
    return _UNSAFE.sub("_", ",".join(f"{name}={axis_label(name, value)}" for name, value in values.items())) or "run"


def expand(given: Mapping[str, Any], out: Path) -> tuple[dict[str, list[str]], list[Cell]]:
    """The axes and the cells of the grid (not yet checked)."""
    axes = axes_of(given)
    cells = []
    for combination in itertools.product(*axes.values()):
        values = dict(zip(axes, combination))
        cells.append(Cell(values, {**given, **values}, Path(out) / folder_name(values)))
    names = [cell.path.name for cell in cells]
    if len(set(names)) < len(names):
        raise SweepError("two cells would share a folder name; use axis values that differ in letters or digits")
    return axes, cells
