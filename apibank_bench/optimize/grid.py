"""The experiment grid (package data `data/optimize_grid.json`) and model aliases.

A cell is (method, topology, model, seed). The grid lists, per method, the
topologies it covers, the model aliases (`qwen` -> a concrete model name) and
the seeds. Aliases can be overridden with the `model_aliases` setting
(`--model-aliases qwen=Org/Model llama=...` or `APIBANK_MODEL_ALIASES`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Iterable, Mapping, TypedDict


class Grid(TypedDict):
    """data/optimize_grid.json: the experiment grid."""

    about: str
    dataset: str
    methods: dict[str, list[str]]  #: method -> the topologies it runs
    models: dict[str, str]  #: alias -> model name
    seeds: list[int]


@cache
def load_grid() -> Grid:
    return json.loads(resources.files("apibank_bench").joinpath("data", "optimize_grid.json").read_text("utf-8"))


def _pairs(items: Iterable[str], source: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        name, sep, model = item.partition("=")
        if not sep or not name.strip() or not model.strip():
            raise ValueError(f"{source}: expected NAME=MODEL, got {item!r}")
        pairs[name.strip()] = model.strip()
    return pairs


def model_aliases(overrides: Iterable[str] = ()) -> dict[str, str]:
    """The grid's aliases, overridden by the `model_aliases` setting's NAME=MODEL pairs."""
    aliases = dict(load_grid()["models"])
    aliases.update(_pairs(overrides, "--model-aliases"))
    return aliases


@dataclass(frozen=True)
class Cell:
    method: str
    topology: str
    model: str | None  #: the concrete model name (None: the embedded smoke model)
    alias: str | None  #: the grid's name for it, None when it is not one of the grid's models
    seed: int

    def describe(self) -> str:
        return f"{self.method} / {self.topology} / {self.alias or self.model or 'embedded model'} / seed {self.seed}"


def cell(method: str, topology: str, model: str | None, seed: int, aliases: Mapping[str, str]) -> Cell:
    """The cell these arguments name: an alias resolves to its model; a model name finds its alias."""
    if model is not None and model in aliases:
        return Cell(method, topology, aliases[model], model, seed)
    alias = next((name for name, target in aliases.items() if target == model), None)
    return Cell(method, topology, model, alias, seed)


def off_grid_reason(c: Cell) -> str | None:
    """Why a cell is outside the experiment grid, None if it is inside."""
    grid = load_grid()
    if c.method not in grid["methods"]:
        return f"method {c.method!r} is not in the grid"
    if c.topology not in grid["methods"][c.method]:
        return f"{c.method} covers {', '.join(grid['methods'][c.method])}, not {c.topology}"
    if c.alias is None:
        name = c.model or "the embedded smoke model"
        return f"model {name} is none of the grid's models ({', '.join(grid['models'])})"
    if c.seed not in grid["seeds"]:
        return f"seed {c.seed} is not one of {', '.join(map(str, grid['seeds']))}"
    return None


def check_cell(c: Cell, allow_any_cell: bool) -> str | None:
    """None when the cell may run; else the one-line refusal."""
    reason = off_grid_reason(c)
    if reason is None or allow_any_cell:
        return None
    return f"cell {c.describe()} is outside the experiment grid ({reason}); pass --allow-any-cell to run it"
