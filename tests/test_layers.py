"""The layer table of docs/architecture.md is the package's folders, and every import goes down the table."""

from __future__ import annotations

import ast
import graphlib
import re

from apibank_bench.core.paths import PROJECT_ROOT
from helpers import layer_of, layer_table

PACKAGE = PROJECT_ROOT / "apibank_bench"


def test_the_table_lists_every_top_level_package_and_module_once():
    listed = [name for _, names in layer_table() for name in names]
    assert len(listed) == len(set(listed))
    present = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    present |= {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert set(listed) == present


def imported_modules(tree: ast.AST):
    """(line, dotted name) of every import, at module level or inside a function; `from A import B` gives A (its
    `__init__` runs) and A.B (B may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, "relative imports hide which layer they reach"
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def test_no_module_imports_from_a_higher_layer():
    layers = layer_of()
    upward: dict[str, None] = {}  # one line per import statement (it names A and A.B)
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        mine = layers[parts[0]]
        for lineno, module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            top = module.split(".")
            if top[0] == "apibank_bench" and len(top) > 1 and layers[top[1]] > mine:
                upward[f"{path.relative_to(PROJECT_ROOT)}:{lineno} imports apibank_bench.{top[1]}"] = None
    assert list(upward) == []


def package_modules(package=PACKAGE) -> dict:
    """The package's modules by dotted name (a package by its own name, not `.__init__`), each with its path."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(package=PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (`imported_modules`: a lazy import is an edge all the same);
    a name that is not a module counts as the nearest module above it."""
    modules = package_modules(package)

    def nearest(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        targets = (target for _, target in imported_modules(ast.parse(path.read_text(encoding="utf-8"))))
        graph[name] |= {found for target in targets if (found := nearest(target)) not in (None, name)}
    return graph


def import_cycle(package=PACKAGE) -> list[str]:
    """One import cycle among the package's modules (A, B, ..., A), or [] when there is none."""
    try:
        graphlib.TopologicalSorter(import_graph(package)).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def test_no_import_cycle_inside_the_package():
    """Two modules that import each other (even one of them inside a function) are one room that was cut in two:
    what both need belongs in a module of its own that both import."""
    assert import_cycle() == []


def test_the_cycle_check_sees_an_import_inside_a_function(tmp_path):
    package = tmp_path / "apibank_bench"
    (package / "reports").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "reports" / "__init__.py").write_text("")
    (package / "reports" / "a.py").write_text("from apibank_bench.reports.b import THING\n")
    (package / "reports" / "b.py").write_text("THING = 1\n\n\ndef later():\n"
                                             "    from apibank_bench.reports import a\n    return a\n")
    assert sorted(set(import_cycle(package))) == ["apibank_bench.reports.a", "apibank_bench.reports.b"]
    (package / "reports" / "b.py").write_text("THING = 1\n")
    assert import_cycle(package) == []


#: The house's bar: no module over this many lines (a longer one holds two things; split it by what each holds).
MAX_LINES = 400


def module_lengths(package=PACKAGE) -> dict[str, int]:
    return {path.relative_to(package).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in package.rglob("*.py")}


def test_no_module_is_over_400_lines():
    over = {name: count for name, count in module_lengths().items() if count > MAX_LINES}
    assert over == {}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (prose, not names a module loads)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def upward_module_strings(path, package=PACKAGE) -> list[str]:
    """The string constants (docstrings aside) of one module that name a module of a higher layer:
    what `importlib.import_module` or a `"module:ATTR"` choice would load behind the import graph's back."""
    layers = layer_of()
    mine = layers[path.relative_to(package).with_suffix("").parts[0]]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            for name in re.findall(r"\bapibank_bench\.(\w+)", node.value):
                if layers.get(name, -1) > mine:
                    found.append(f"{path.relative_to(package)}:{node.lineno} names {node.value!r}")
    return found


def test_no_module_names_a_higher_layer_in_a_string():
    """No string-loading up a layer either (core's settings once loaded five layers by `"module:ATTR"`)."""
    found = [hit for path in PACKAGE.rglob("*.py") if path.relative_to(PACKAGE).parts != ("__init__.py",)
             for hit in upward_module_strings(path)]
    assert found == []


def test_the_string_check_sees_a_module_path(tmp_path):
    module = PACKAGE / "core" / "settings" / "table.py"
    planted = tmp_path / "apibank_bench" / "core" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(module.read_text(encoding="utf-8") + '\nX = "apibank_bench.optimize.methods:METHODS"\n')
    hits = upward_module_strings(planted, tmp_path / "apibank_bench")
    assert [hit.split(" names ")[1] for hit in hits] == ["'apibank_bench.optimize.methods:METHODS'"]


#: The one topology name spelled outside agents/topologies/: core's default, which core (below the
#: agents layer) cannot ask for; resolution checks it against the registry like any other choice.
TOPOLOGY_NAMES_ALLOWED = {("apibank_bench/core/settings/run_config.py", "single")}


def topology_names_outside_topologies(package=PACKAGE) -> list[str]:
    """String constants (docstrings aside) outside agents/topologies/ that are a topology's name."""
    from apibank_bench.agents.topologies import TOPOLOGIES

    names = set(TOPOLOGIES.names())
    found = []
    for path in package.rglob("*.py"):
        where = path.relative_to(package.parent).as_posix()
        if where.startswith("apibank_bench/agents/topologies/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _docstrings(tree)
        found += [f"{where}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in names and id(node) not in prose
                  and (where, node.value) not in TOPOLOGY_NAMES_ALLOWED]
    return found


def registry_extra_reads(package=PACKAGE) -> list[str]:
    """Reads of a registration's untyped `extra` dict anywhere in the package."""
    found = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(package.parent).as_posix()}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == "extra"
                  and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", None) == "entry"]
    return found


def test_no_topology_is_named_outside_its_package():
    """Which topologies exist, what a team is and what each reads are the topology specs': every other
    module asks a spec (agents/topologies/spec.py), none names a topology."""
    assert topology_names_outside_topologies() == []


def test_no_registration_is_read_as_an_untyped_dict():
    """A topology's facts are TopologySpec's typed fields (an API scorer's, ApiScoring's), not a
    registration's `extra` dict: the registry has none, and nothing reads one."""
    import dataclasses

    from apibank_bench.core.registry import Entry

    assert [field.name for field in dataclasses.fields(Entry)] == ["name", "value", "help", "aliases"]
    assert registry_extra_reads() == []


def test_the_topology_checks_find_what_they_look_for(tmp_path):
    package = tmp_path / "apibank_bench"
    (package / "runs").mkdir(parents=True)
    (package / "runs" / "planted.py").write_text(
        'from apibank_bench.agents.topologies import TOPOLOGIES\n'
        'TEAM = "decentralized"\nFINAL = TOPOLOGIES.entry(TEAM).extra.get("final_role")\n')
    assert topology_names_outside_topologies(package) == ["apibank_bench/runs/planted.py:2 'decentralized'"]
    assert registry_extra_reads(package) == ["apibank_bench/runs/planted.py:3"]


def test_test_modules_share_helpers_through_one_module_not_each_other():
    """Tests share fixtures through conftest.py and helpers through tests/helpers.py: a test module that
    imports another runs (and collects) that one's module-level set-up too."""
    tests = PROJECT_ROOT / "tests"
    found = []
    for path in [*tests.glob("*.py"), *(PROJECT_ROOT / "benchmarks").glob("*.py")]:
        for line, name in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            if name.startswith("test_") or name == "conftest":
                found.append(f"{path.relative_to(PROJECT_ROOT)}:{line} imports {name}")
    assert found == []
    defined = [path.name for path in tests.glob("test_*.py")
               if re.search(r"^def stub\(\):", path.read_text(encoding="utf-8"), flags=re.M)]
    assert defined == []  # the one `stub` fixture is conftest's
