"""Mutation score of a module: apply one small change at a time and see whether its tests notice.

Each mutant changes one spot of the module's code: a comparison flipped or loosened (`<` to `<=`,
`==` to `!=`), an arithmetic operator swapped (`+`/`-`, `*`/`/`), an integer constant moved by one,
`and`/`or` swapped, a `not` or a unary minus dropped, a `min`/`max` swapped, a returned boolean
inverted. The module is rewritten (by `ast.unparse`) in a copy of the project, the given tests run
there with `-x` (in this process, on fresh imports of the project), and a mutant whose tests still
pass survived. Docstrings are not mutated.

    python benchmarks/mutation_score.py apibank_bench/runs/stats.py tests/test_stats.py [-k EXPR] [--list]

The output ends with `killed K of N` and one line per survivor (line, what changed) to judge:
an equivalent mutant (no behaviour can tell it apart), or a missing test.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.And: ast.Or, ast.Or: ast.And,
}
FUNCTION_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            found.add(id(body[0].value))
    return found


def mutations(tree: ast.AST) -> list[tuple[int, str]]:
    """(index of the node in ast.walk order, what changes) for every mutation of the tree."""
    skip = _docstrings(tree)
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.Compare):
            found += [(index, f"{type(op).__name__} -> {SWAPS[type(op)].__name__}") for op in node.ops[:1]
                      if type(op) in SWAPS]
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAPS:
            found.append((index, f"{type(node.op).__name__} -> {SWAPS[type(node.op)].__name__}"))
        elif isinstance(node, ast.BoolOp):
            found.append((index, f"{type(node.op).__name__} -> {SWAPS[type(node.op)].__name__}"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            found.append((index, f"drop {type(node.op).__name__}"))
        elif isinstance(node, ast.Constant) and id(node) not in skip and type(node.value) is int:
            found.append((index, f"{node.value} -> {node.value + 1}"))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            found.append((index, f"{node.value} -> {not node.value}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTION_SWAPS:
            found.append((index, f"{node.func.id} -> {FUNCTION_SWAPS[node.func.id]}"))
    return found


def mutate(tree: ast.AST, target: int) -> tuple[ast.AST, int]:
    """A copy of the tree with the mutation at node `target` applied; and its line."""
    tree = copy.deepcopy(tree)
    for index, node in enumerate(ast.walk(tree)):
        if index != target:
            continue
        if isinstance(node, ast.Compare):
            node.ops[0] = SWAPS[type(node.ops[0])]()
        elif isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)):
            node.op = SWAPS[type(node.op)]()
        elif isinstance(node, ast.UnaryOp):
            return _replace(tree, node, node.operand), node.lineno
        elif isinstance(node, ast.Constant):
            node.value = (not node.value) if type(node.value) is bool else node.value + 1
        elif isinstance(node, ast.Call):
            node.func.id = FUNCTION_SWAPS[node.func.id]
        return tree, node.lineno
    raise IndexError(target)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> ast.AST:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
            elif isinstance(value, list):
                parent_list = value
                for i, item in enumerate(parent_list):
                    if item is old:
                        parent_list[i] = new
    return tree


def sandbox() -> Path:
    """A copy of the project where the module can be rewritten: the package copied, the rest linked."""
    where = Path(tempfile.mkdtemp(prefix="mutants-"))
    for entry in ROOT.iterdir():
        if entry.name == "apibank_bench":
            shutil.copytree(entry, where / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
        elif entry.name not in (".git",):
            (where / entry.name).symlink_to(entry)
    return where


class Hung(KeyboardInterrupt):
    """A mutant's tests ran past --timeout (an infinite loop): pytest stops as if interrupted."""


def run_tests(where: Path, pytest_args: list[str], timeout: float, quiet: bool = True) -> int:
    """pytest in this process, on fresh imports of the project (numpy, scipy and pytest stay loaded:
    they are most of a new process's start)."""
    import pytest

    for name in [name for name in sys.modules if name.startswith(("apibank_bench", "test_", "tests", "conftest"))
                 or name in ("openai_stub", "stub_endpoint", "results_folders", "upstream_apibank")]:
        del sys.modules[name]

    def stop(*_):
        raise Hung()

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull if quiet else sys.stdout), \
                contextlib.redirect_stderr(devnull if quiet else sys.stderr):
            return int(pytest.main(pytest_args))
    except Hung:
        return 99
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the module's path, e.g. apibank_bench/runs/stats.py")
    parser.add_argument("tests", nargs="+", help="the test files (or node IDs) that should kill the mutants")
    parser.add_argument("-k", default=None, help="pytest's -k for the tests")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, as one string")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before a mutant's tests count as hung")
    args = parser.parse_args()

    source = (ROOT / args.module).read_text(encoding="utf-8")
    tree = ast.parse(source)
    found = mutations(tree)
    if args.list:
        for index, what in found:
            print(mutate(tree, index)[1], what)
        return 0
    where = sandbox()
    target = where / args.module
    pytest_args = ["-x", "-q", "-p", "no:cacheprovider", *(["-k", args.k] if args.k else []),
                   *args.pytest_args.split(), *args.tests]
    sys.dont_write_bytecode = True  # the mutant's source changes within one second: no stale .pyc
    sys.path[:0] = [str(where), str(where / "tests")]
    os.environ["PYTHONPATH"] = f"{where}{os.pathsep}{where / 'tests'}"  # for the tests' subprocesses
    os.chdir(where)
    survivors = []
    try:
        if run_tests(where, pytest_args, args.timeout) != 0:
            run_tests(where, pytest_args, args.timeout, quiet=False)
            print("the tests fail on the unmutated module: nothing to measure")
            return 2
        for number, (index, what) in enumerate(found, start=1):
            mutant, line = mutate(tree, index)
            try:
                text = ast.unparse(ast.fix_missing_locations(mutant))
            except Exception:  # noqa: BLE001 - a mutant that cannot be written is not counted
                continue
            target.write_text(text, encoding="utf-8")
            killed = run_tests(where, pytest_args, args.timeout) != 0
            print(f"{number}/{len(found)} line {line}: {what}: {'killed' if killed else 'SURVIVED'}", flush=True)
            if not killed:
                survivors.append(f"line {line}: {what}")
    finally:
        os.chdir(ROOT)
        shutil.rmtree(where, ignore_errors=True)
    print(f"{args.module}: killed {len(found) - len(survivors)} of {len(found)}")
    for survivor in survivors:
        print(f"  survived: {survivor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
