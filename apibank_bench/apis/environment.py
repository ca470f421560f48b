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

Databases are read from disk once per process, each when a tool first needs it, and
copied per tool through `marshal`, which is many times faster than `copy.deepcopy`.
"""

from __future__ import annotations

import json
import marshal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from apibank_bench.data import specs
from apibank_bench.apis import Api, api_classes
from apibank_bench.core.frozen import thaw
from apibank_bench.core.memo import load_once


class _Databases(Mapping):
    """The `init_database/*.json` of one data root by name, each file read on first use: a task needs a
    few small ones, and reading them all (ImageCaptioning.json alone is 2.5 MB) was most of a short
    command's time. Never mutate a value; `copy_of` gives a tool its own."""

    def __init__(self, init_dir: Path) -> None:
        self._paths = {path.stem: path for path in sorted(init_dir.glob("*.json"))}
        self._read: dict[str, tuple[Any, bytes]] = {}  #: name -> (the value, its marshal bytes)
        self._lock = threading.Lock()  # instance threads may ask for the same file at once

    def _entry(self, name: str) -> tuple[Any, bytes]:
        with self._lock:
            if name not in self._read:
                with self._paths[name].open(encoding="utf-8") as handle:
                    value = json.load(handle)
                self._read[name] = value, marshal.dumps(value)
            return self._read[name]

    def __getitem__(self, name: str) -> Any:
        return self._entry(name)[0]

    def copy_of(self, name: str) -> Any:
        """A plain, mutable copy of one database. JSON values survive marshal's round trip exactly
        (dicts keep their order), and it is several times faster than a copy made in Python."""
        return marshal.loads(self._entry(name)[1])

    def __contains__(self, name: object) -> bool:  # without reading the file
        return name in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@load_once
def _databases(init_dir: str) -> _Databases:
    return _Databases(Path(init_dir))


def initial_databases(root: Path) -> _Databases:
    """The `init_database/*.json` of a data root, each read once per process (never mutate)."""
    return _databases(str(Path(root) / "init_database"))


def convert_parameters(api_cls: type[Api], params: Mapping[str, Any]) -> dict[str, Any]:
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

    def api_class(self, name: str) -> type[Api]:
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
        database = api_cls.database_name
        if database is not None and database in self._databases:
            args.append(self._databases.copy_of(database))
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
