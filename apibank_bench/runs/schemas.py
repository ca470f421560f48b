"""The result files' JSON Schemas, generated from their typed models and shipped in the package
(`apibank_bench/schemas/*.schema.json`); `tests/test_file_schemas.py` fails when a shipped file is not
what the models generate, so they never drift. To regenerate them after changing a model:

    python -m apibank_bench.runs.schemas            # rewrites apibank_bench/schemas/
    python -m apibank_bench.runs.schemas --check    # exit 1 naming each file that differs

The models: `runs.row.ResultRow` (its written fields, the columns required), `agents.turn.AgentTurn`
(a trace's turn), and the TypedDicts of `runs.file_models`. A field's `#:` comment becomes its
description. pydantic (installed with openai and langgraph) writes the schemas; it is imported here
only, so no run pays for it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path
from types import UnionType
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from apibank_bench.runs import file_models, versions

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"  #: shipped as package data (pyproject)
FILE_NAMES = {  #: each result file's schema file
    versions.RESULTS_ROW: "results-row.schema.json",
    versions.PREDICTION_LINE: "prediction-line.schema.json",
    versions.SUMMARY: "summary.schema.json",
    versions.RUN_RECORD: "run-record.schema.json",
    versions.TRACE: "trace.schema.json",
}
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_COMMENT = re.compile(r"^\s+(\w+): [^#]*#: (.+)$")


def _comments(cls: type) -> dict[str, str]:
    """A class's fields' `#:` comments (on the field's line), by field name."""
    lines = inspect.getsource(cls).splitlines()
    return {match.group(1): match.group(2).strip() for match in map(_COMMENT.match, lines) if match}


def _typed_dict(name: str, hints: dict[str, Any], required: set[str], doc: str | None) -> Any:
    """A TypedDict as pydantic reads it on Python 3.11 (typing_extensions'), its fields' types converted too."""
    import typing_extensions

    form = typing_extensions.TypedDict(name, {  # type: ignore[misc]
        key: _readable(hint) if key in required else typing_extensions.NotRequired[_readable(hint)]
        for key, hint in hints.items()})
    form.__doc__ = doc
    return form


_CONVERTED: dict[type, Any] = {}


def _readable(hint: Any) -> Any:
    """`hint` with every typing.TypedDict in it replaced by its typing_extensions twin (pydantic on Python
    3.11 reads only those); the models stay plain typing (no import for a run)."""
    if is_typeddict(hint) and hint not in _CONVERTED.values():
        if hint not in _CONVERTED:
            _CONVERTED[hint] = _typed_dict(hint.__name__, *_fields(hint), inspect.cleandoc(hint.__doc__ or "") or None)
        return _CONVERTED[hint]
    args = get_args(hint)
    if not args:
        return hint
    converted = tuple(_readable(arg) for arg in args)
    if isinstance(hint, UnionType) or get_origin(hint) is Union:
        return Union[converted]
    return get_origin(hint)[converted]


def row_form() -> Any:
    """A results.jsonl line's JSON form: ResultRow's written fields; `id`, the columns every row has and
    `schema_version` required (a line may hold more: a cut string's `<key>_truncated` note)."""
    from apibank_bench.runs.row import _FIELDS, ResultRow

    hints = get_type_hints(ResultRow)
    required = {"id"} | {spec.name for spec in _FIELDS if spec.metadata.get("column")}
    return _typed_dict("ResultRow", {spec.name: hints[spec.name] for spec in _FIELDS}, required,
                       "One line of results.jsonl: an instance's (and epoch's) scored answer.")


def turn_form() -> Any:
    """A trace's agent turn: AgentTurn's written fields, all of them written."""
    from apibank_bench.agents.turn import _WRITTEN, AgentTurn

    hints = get_type_hints(AgentTurn)
    return _typed_dict("AgentTurn", {name: hints[name] for name in _WRITTEN}, set(_WRITTEN),
                       inspect.cleandoc(AgentTurn.__doc__ or ""))


def _fields(model: Any) -> tuple[dict[str, Any], set[str]]:
    """A typing.TypedDict's fields' types and its required keys (read from the hints: with postponed
    annotations Python 3.11 takes every key of a TypedDict for required)."""
    hints = get_type_hints(model, include_extras=True)
    optional = {name for name, hint in hints.items() if get_origin(hint) is NotRequired}
    return {name: get_args(hint)[0] if name in optional else hint for name, hint in hints.items()}, set(hints) - optional


def _from_typed_dict(model: Any, **replaced: Any) -> Any:
    hints, required = _fields(model)
    return _typed_dict(model.__name__, {**hints, **replaced}, required, inspect.cleandoc(model.__doc__ or ""))


def _models() -> dict[str, Any]:
    """Each file kind's model, as pydantic reads it."""
    row = row_form()
    trace = _from_typed_dict(file_models.Trace, result=row, agents=list[turn_form()])  # type: ignore[misc]
    return {versions.RESULTS_ROW: row, versions.PREDICTION_LINE: _readable(file_models.PredictionLine),
            versions.SUMMARY: _readable(file_models.Summary), versions.RUN_RECORD: _readable(file_models.RunRecord),
            versions.TRACE: trace}


def _described(schema: dict, sources: dict[str, type]) -> None:
    """Give each object schema whose title names a model its fields' comments as descriptions."""
    for part in [schema, *schema.get("$defs", {}).values()]:
        source = sources.get(part.get("title", ""))
        if source is None or "properties" not in part:
            continue
        for name, text in _comments(source).items():
            if name in part["properties"]:
                part["properties"][name]["description"] = text


def json_schemas() -> dict[str, dict]:
    """Each result file's JSON Schema (draft 2020-12), by file kind (runs.versions.KINDS)."""
    from pydantic import TypeAdapter

    from apibank_bench.agents.turn import AgentTurn
    from apibank_bench.runs.row import ResultRow

    sources: dict[str, type] = {name: value for name, value in vars(file_models).items()
                                if isinstance(value, type) and value.__module__ == file_models.__name__}
    sources.update(ResultRow=ResultRow, AgentTurn=AgentTurn)
    schemas = {}
    for kind, model in _models().items():
        body = TypeAdapter(model).json_schema()
        _described(body, sources)
        body["properties"][versions.VERSION_KEY] = {"const": versions.WRITES[kind],
                                                    "description": "this file's form (runs.versions)"}
        schemas[kind] = {"$schema": DIALECT, "$id": f"apibank-bench:{FILE_NAMES[kind]}", **body}
    return schemas


def schema_texts() -> dict[str, str]:
    """Each shipped schema file's text, by file name."""
    return {FILE_NAMES[kind]: json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
            for kind, schema in json_schemas().items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apibank_bench.runs.schemas",
                                     description="Write the result files' JSON Schemas from their models.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a shipped file differs")
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help=f"the folder (default {SCHEMA_DIR})")
    args = parser.parse_args(argv)
    differ = []
    for name, text in schema_texts().items():
        path = args.out / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        differ.append(path)
        if not args.check:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in differ:
        print(f"{'differs' if args.check else 'wrote'}: {path}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
