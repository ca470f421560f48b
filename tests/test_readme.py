"""The README's commands are true: each `apibank-bench` line of its code blocks parses with the real
command line, each `pytest bench_tests` option exists, and the lines that need no endpoint and no
model (the gold self-check, the data check) run and succeed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from apibank_bench.cli import build_parser
from apibank_bench.core import settings
from apibank_bench.core.paths import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def commands() -> list[list[str]]:
    """Every command of the README's bash blocks: continuations joined, `NAME="..."` variables expanded,
    comments, `[optional]` placeholders and `...` dropped, `a && b` split."""
    found = []
    for block in BLOCKS:
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            assignment = re.fullmatch(r"(\w+)=(.*)", words[0]) if len(words) == 1 else None
            if assignment:
                variables[assignment[1]] = assignment[2]
                continue
            words = [part for word in words for part in (shlex.split(variables[word[1:]])
                                                         if word[1:] in variables else [word])]
            words = [word for word in _without_brackets(words) if word != "..."]
            command: list[str] = []
            for word in [*words, "&&"]:
                if word == "&&":
                    if command:
                        found.append(command)
                    command = []
                else:
                    command.append(word)
    return found


def _without_brackets(words: list[str]) -> list[str]:
    """The words outside `[optional parts]` (a quoted argument stays one word)."""
    kept, depth = [], 0
    for word in words:
        depth += word.startswith("[")
        if not depth:
            kept.append(word)
        depth -= word.endswith("]") and depth > 0
    return kept


def cli_lines() -> list[list[str]]:
    return [command[1:] for command in commands()
            if command and command[0].removeprefix(".venv/bin/") == "apibank-bench"]


def pytest_lines() -> list[list[str]]:
    return [command[1:] for command in commands() if command[:2] == ["pytest", "bench_tests"]]


def test_the_readme_has_commands_to_check():
    assert len(cli_lines()) >= 12 and len(pytest_lines()) >= 4


@pytest.mark.parametrize("argv", cli_lines(), ids=" ".join)
def test_each_apibank_bench_line_parses(argv):
    args = build_parser().parse_args(argv)  # an unknown subcommand or flag exits (usage error)
    assert callable(args.func)


@pytest.mark.parametrize("argv", pytest_lines(), ids=" ".join)
def test_each_pytest_line_uses_existing_options(argv):
    known = {s.option for s in settings.SETTINGS} | {"--apibank-no-" + s.name.replace("_", "-")
                                                      for s in settings.SETTINGS if s.flag}
    used = [word for word in argv if word.startswith("--apibank-")]
    assert set(used) <= known


def runnable() -> list[list[str]]:
    """The lines that need neither an endpoint nor the embedded model."""
    return [argv for argv in cli_lines() if argv[0] == "run" and ("gold" in argv or "--summary" in argv)]


@pytest.mark.parametrize("argv", runnable(), ids=" ".join)
def test_lines_that_need_no_endpoint_run(argv, tmp_path, apibank_root):
    assert runnable()
    run = subprocess.run([sys.executable, "-m", "apibank_bench", argv[0], "--out-dir", str(tmp_path), *argv[1:]],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "APIBANK_ROOT": str(apibank_root)})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    if "--summary" in argv:
        assert '"gold_replay_correct": 100' in run.stdout
    else:
        assert "overall      100  100" in run.stdout  # all 100 gold calls correct
