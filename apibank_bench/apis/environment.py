"""A fresh, isolated API environment for one scored task.

This follows the reference harness's wrapper around upstream's classes (the
protocol our scores must equal), not upstream's own ToolManager, where the two
differ:

* every tool gets its *own* copy of its initial database (upstream's ToolManager
  hands the same dict to all tools of a database; the wrapper deep-copies per
  tool, so e.g. RegisterUser's new account is not seen by GetUserToken);
* the token checker is a CheckToken instance of its own, also with its own copy;
* parameters are converted with plain `int()` / `float()` (upstream asserts
  `isdigit()` first) and bools accept a real bool (upstream maps True to False).

Databases are read from disk once per process and copied per tool with a
JSON-shaped copy, which is several times faster than `copy.deepcopy`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from apibank_bench.data import specs
from apibank_bench.apis import api_classes
from apibank_bench.core.frozen import thaw
from apibank_bench.core.memo import load_once

_DB_LOCK = threading.Lock()


@load_once
def _read_databases(init_dir: str) -> Mapping[str, Any]:
    databases = {}
    for path in sorted(Path(init_dir).glob("*.json")):
        with path.open(encoding="utf-8") as handle:
            databases[path.stem] = json.load(handle)
    return MappingProxyType(databases)


def initial_databases(root: Path) -> Mapping[str, Any]:
    """The `init_database/*.json` of a data root, read once per process (never mutate)."""
    with _DB_LOCK:
        return _read_databases(str(Path(root) / "init_database"))


def convert_parameters(api_cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """The wrapper's parameter handling: reject unknown names, coerce declared types."""
    declared = api_cls.input_parameters
    processed: dict[str, Any] = {}
    for key, value in params.items():
        if key not in declared:
            raise AssertionError(f"invalid parameter name. parameter: {key}")
        kind = declared[key].get("type")
        if kind == "int":
            processed[key] = int(value)
        elif kind == "float":
            processed[key] = float(value)
        elif kind == "bool":
            processed[key] = value if isinstance(value, bool) else str(value) == "True"
        else:
            processed[key] = value
    return processed


class Environment:
    """One task's API instances. Create a new one per task; never share across threads."""

    def __init__(self, api_set: str, root: Path) -> None:
        self.api_set = api_set
        self.classes = api_classes(api_set)
        self._databases = initial_databases(root)
        self._tools: dict[str, Any] = {}
        self.token_checker = self.tool("CheckToken") if "CheckToken" in self.classes else None

    @classmethod
    def for_level(cls, level: str, root: Path) -> "Environment":
        return cls(specs.api_set_for_level(level), root)

    def api_class(self, name: str) -> type:
        try:
            return self.classes[name]
        except KeyError:
            raise KeyError(f"API class {name!r} not found in {self.api_set}") from None

    def tool(self, name: str) -> Any:
        """The API instance, built on first use as upstream does (positional arguments)."""
        if name in self._tools:
            return self._tools[name]
        api_cls = self.api_class(name)
        args: list[Any] = []
        if api_cls.database_name in self._databases:
            args.append(thaw(self._databases[api_cls.database_name]))
        if name != "CheckToken" and "token" in api_cls.input_parameters and self.token_checker is not None:
            args.append(self.token_checker)
        tool = api_cls(*args)
        self._tools[name] = tool
        return tool

    def call(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        processed = convert_parameters(self.api_class(name), params)
        return self.tool(name).call(**processed)

    def replay(self, api_turns) -> None:
        """Execute earlier API turns in order; ToolSearcher turns are skipped, as the reference does."""
        for turn in api_turns:
            if turn.api_name == "ToolSearcher":
                continue
            # Plain copies: APIs may mutate or hash their arguments as upstream's do with JSON values.
            self.call(turn.api_name, thaw(turn.params))
