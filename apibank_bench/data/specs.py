"""API metadata (name, description, parameters, database) as API-Bank defines it.

The metadata is data, not code: `data/api_specs.json` holds, for every API of
upstream's `apis/` (Levels 1-2) and `lv3_apis/` (Level 3), the exact strings of
its class attributes. Prompts and ToolSearcher outputs must reproduce them byte
for byte, so nothing here retypes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from apibank_bench.core.memo import load_once

#: The two API sets: upstream's folder names, which are also our keys.
LEVEL12 = "apis"
LEVEL3 = "lv3_apis"
API_SETS = (LEVEL12, LEVEL3)
#: Beside this module (the package is always installed unzipped, so a path, not `importlib.resources`,
#: whose readers and zipfile imports cost more than reading the file).
SPECS_FILE = Path(__file__).with_name("api_specs.json")


def api_set_for_level(level: str) -> str:
    """Level "3" runs on its own API set; Levels 1 and 2 share upstream's `apis/`."""
    return LEVEL3 if str(level) == "3" else LEVEL12


@load_once
def _load() -> dict[str, dict[str, dict[str, Any]]]:
    text = SPECS_FILE.read_text("utf-8")
    raw = json.loads(text)
    return {api_set: {item["name"]: item for item in raw[api_set]} for api_set in API_SETS}


def specs(api_set: str) -> Mapping[str, dict[str, Any]]:
    """All specs of one API set, by API name (read-only view; do not mutate the dicts)."""
    return MappingProxyType(_load()[api_set])


def spec(api_set: str, name: str) -> dict[str, Any]:
    try:
        return _load()[api_set][name]
    except KeyError:
        raise KeyError(f"no API named {name!r} in {api_set}") from None


def description_payload(api_set: str, name: str) -> dict[str, Any]:
    """What upstream's ToolManager.get_api_description shows: the class attributes, in order."""
    item = spec(api_set, name)
    return {
        "name": item["name"],
        "description": item["description"],
        "input_parameters": item["input_parameters"],
        "output_parameters": item["output_parameters"],
    }
