"""The layer table of docs/architecture.md is the package's folders, and every import goes down the table."""

from __future__ import annotations

import ast
import re

from apibank_bench.core.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "apibank_bench"


def layer_table() -> list[tuple[str, list[str]]]:
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers: start -->", 1)[1].split("<!-- layers: end -->", 1)[0]
    rows = [line for line in block.strip().splitlines()[2:] if line.startswith("|")]
    table = []
    for row in rows:
        layer, places = [cell.strip() for cell in row.strip("|").split("|")][:2]
        table.append((layer, [name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", places)]))
    return table


def layer_of() -> dict[str, int]:
    return {name: index for index, (_, names) in enumerate(layer_table()) for name in names}


def test_the_table_lists_every_top_level_package_and_module_once():
    listed = [name for _, names in layer_table() for name in names]
    assert len(listed) == len(set(listed))
    present = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    present |= {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert set(listed) == present


def imported_modules(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, "relative imports hide which layer they reach"
            if node.module == "apibank_bench":
                yield from ((node.lineno, f"apibank_bench.{alias.name}") for alias in node.names)
            else:
                yield node.lineno, node.module


def test_no_module_imports_from_a_higher_layer():
    layers = layer_of()
    upward = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        mine = layers[parts[0]]
        for lineno, module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            top = module.split(".")
            if top[0] == "apibank_bench" and len(top) > 1 and layers[top[1]] > mine:
                upward.append(f"{path.relative_to(PROJECT_ROOT)}:{lineno} imports {module}")
    assert upward == []
