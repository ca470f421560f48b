"""The exit codes are one enum: `run`'s help is written from it and `run` maps every pytest outcome onto it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from apibank_bench.cli import build_parser
from apibank_bench.commands.run import exit_code
from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.plugin.bench_session import ENDPOINT_UNREACHABLE


def test_run_help_lists_every_exit_code_with_its_meaning(capsys):
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for code in ExitCode:
        assert f"{code.value} {' '.join(code.meaning.split())}" in help_text, code


def outcome(stopped=False, regression=False, summary=None):
    return SimpleNamespace(stopped=stopped, regression=regression, summary=summary)


@pytest.mark.parametrize("status, seen, expected", [
    (pytest.ExitCode.OK, outcome(summary={"errors": 0, "not_run": 0}), ExitCode.OK),
    (pytest.ExitCode.TESTS_FAILED, outcome(summary={"errors": 2, "not_run": 0}), ExitCode.INCOMPLETE),
    (pytest.ExitCode.OK, outcome(summary={"errors": 0, "not_run": 3}), ExitCode.INCOMPLETE),
    (pytest.ExitCode.INTERRUPTED, outcome(stopped=True), ExitCode.INCOMPLETE),  # the breaker stopped it
    (pytest.ExitCode.INTERRUPTED, outcome(), ExitCode.INTERRUPTED),  # Ctrl-C or SIGTERM
    (pytest.ExitCode.USAGE_ERROR, outcome(), ExitCode.USAGE),
    (pytest.ExitCode.NO_TESTS_COLLECTED, outcome(), ExitCode.USAGE),
    (ENDPOINT_UNREACHABLE, outcome(), ExitCode.UNREACHABLE),
    (pytest.ExitCode.INTERNAL_ERROR, outcome(), ExitCode.UNREACHABLE),
    (pytest.ExitCode.TESTS_FAILED, outcome(regression=True, summary={"errors": 0}), ExitCode.WORSE),
])
def test_every_pytest_outcome_maps_to_one_exit_code(status, seen, expected):
    assert exit_code(status, seen) is expected


def test_the_codes_keep_their_numbers():
    # Scripts and CI jobs test these numbers: changing one is a breaking change.
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4, 130]


@pytest.mark.parametrize("page", ["README.md", "docs/running.md"])
def test_the_docs_exit_code_tables_are_the_enums(page):
    from pathlib import Path

    from apibank_bench.core.exit_codes import markdown_table

    text = (Path(__file__).resolve().parents[1] / page).read_text()
    start, end = "<!-- exit codes: start -->\n", "\n<!-- exit codes: end -->"
    table = text[text.index(start) + len(start):text.index(end)]
    assert table.strip() == markdown_table().strip(), (
        f"{page}'s exit-code table differs from the enum: paste `python -m apibank_bench.core.exit_codes`")
