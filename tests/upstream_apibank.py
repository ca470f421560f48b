"""Load the API classes of an upstream `api-bank` checkout, isolated from everything else.

Upstream's modules import their base class as `from apis.api import API` (or
`from .api import API`), so while they load, a package named `apis` (and
`lv3_apis`) must be in `sys.modules`. `load_upstream_apis` puts it there, loads
each API file, and then restores `sys.modules` exactly as it was: the classes keep
working (their functions hold their module globals), and no later import of a
module called `apis` sees upstream's.

Only third-party imports that fail here (googletrans, nltk, rank_bm25, ...) are
replaced by inert stub modules, and only while loading; the classes of such files
are reported in `UpstreamApis.stubbed` so callers can leave them out of behavioural
comparisons. `tool_search.py` is never loaded (it imports sentence-transformers,
hence torch); ToolSearcher has its own tests.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

API_SETS = ("apis", "lv3_apis")
NOT_LOADED = frozenset({"__init__.py", "api.py", "tool_search.py"})


@dataclass(frozen=True)
class UpstreamApis:
    classes: dict  #: API name -> upstream class
    stubbed: frozenset  #: names of classes whose module needed stubbed third-party imports
    stubs: tuple  #: the third-party module names that were stubbed


class _Inert:
    """Stands in for anything taken from a stubbed module: callable, does nothing."""

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _StubModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__ = []  # a package, so `from stub.sub import x` finds the sub-stub

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


def _package(name: str, path: Path) -> types.ModuleType:
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    package.__package__ = name
    return package


def _exec_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _is_upstream(name: str) -> bool:
    return any(name == api_set or name.startswith(api_set + ".") for api_set in API_SETS)


@cache
def load_upstream_apis(checkout: str, api_set: str) -> UpstreamApis:
    """Every API class of `checkout/<api_set>` (except ToolSearcher), by class name."""
    if api_set not in API_SETS:
        raise ValueError(f"unknown API set {api_set!r}")
    root = Path(checkout)
    before = {name: module for name, module in sys.modules.items() if _is_upstream(name)}
    stubs: list[str] = []
    stubbed: set[str] = set()
    classes: dict[str, type] = {}
    try:
        for name in list(sys.modules):
            if _is_upstream(name):
                del sys.modules[name]
        sys.modules["apis"] = _package("apis", root / "apis")
        base = _exec_file("apis.api", root / "apis" / "api.py").API
        sys.modules["apis"].API = base
        if api_set != "apis":
            sys.modules[api_set] = _package(api_set, root / api_set)
        for path in sorted((root / api_set).glob("*.py")):
            if path.name in NOT_LOADED:
                continue
            needed_stub = False
            while True:
                try:
                    module = _exec_file(f"{api_set}.{path.stem}", path)
                    break
                except ModuleNotFoundError as exc:
                    # Only a missing third-party module is stubbed; a missing upstream one is an error.
                    if not exc.name or _is_upstream(exc.name) or exc.name in sys.modules:
                        raise
                    sys.modules[exc.name] = _StubModule(exc.name)
                    stubs.append(exc.name)
                    needed_stub = True
            for value in vars(module).values():
                if inspect.isclass(value) and issubclass(value, base) and value is not base \
                        and value.__module__ == module.__name__:
                    classes[value.__name__] = value
                    if needed_stub:
                        stubbed.add(value.__name__)
    finally:
        # Undo exactly what was added: upstream's packages and the stubs. Third-party
        # modules that upstream imported for real (requests, numpy) stay loaded.
        for name in list(sys.modules):
            if _is_upstream(name) or name in stubs:
                del sys.modules[name]
        sys.modules.update({name: module for name, module in before.items() if _is_upstream(name)})
    return UpstreamApis(classes, frozenset(stubbed), tuple(stubs))


class UpstreamTools:
    """One sample's upstream tools, built as upstream's ToolManager builds them: each API class with its
    database (shared, or a `copy` per tool as the reference harness's wrapper gives it) and, where it
    takes a token, the CheckToken tool. Parameters are converted first, as our `Environment.call` does."""

    def __init__(self, classes: dict, databases: dict, copy=None) -> None:
        self.classes = classes
        self.databases = databases
        self.copy = copy or (lambda database: database)
        self._tools: dict = {}
        self.token_checker = self.tool("CheckToken") if "CheckToken" in classes else None

    def tool(self, name: str):
        if name not in self._tools:
            api_cls = self.classes[name]
            args = []
            if getattr(api_cls, "database_name", None) in self.databases:
                args.append(self.copy(self.databases[api_cls.database_name]))
            if name != "CheckToken" and "token" in api_cls.input_parameters and self.token_checker is not None:
                args.append(self.token_checker)
            self._tools[name] = api_cls(*args)
        return self._tools[name]

    def call(self, name: str, params):
        from apibank_bench.apis.environment import convert_parameters

        processed = convert_parameters(self.classes[name], params)
        return self.tool(name).call(**processed)
