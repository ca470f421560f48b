"""The exit codes are one enum: `run`'s help is written from it and `run` maps every pytest outcome onto it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from apibank_bench.cli import build_parser
from apibank_bench.commands.run import exit_code
from apibank_bench.core.exit_codes import ExitCode, of_pytest_session
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
    (ExitCode.WORSE, outcome(regression=True, summary={"errors": 0}), ExitCode.WORSE),  # the gate's, under pytest
    (ExitCode.INTERRUPTED, outcome(), ExitCode.INTERRUPTED),  # pytest's 2, as the plugin gives it
])
def test_every_pytest_outcome_maps_to_one_exit_code(status, seen, expected):
    assert exit_code(status, seen) is expected


@pytest.mark.parametrize("status, stopped, expected", [
    (pytest.ExitCode.OK, False, 0),
    (pytest.ExitCode.TESTS_FAILED, False, 1),  # a wrong answer fails its test, under pytest
    (pytest.ExitCode.INTERRUPTED, False, ExitCode.INTERRUPTED),  # Ctrl-C: 130, not pytest's 2 (`run`'s usage error)
    (pytest.ExitCode.INTERRUPTED, True, ExitCode.INCOMPLETE),  # the run stopped itself
    (pytest.ExitCode.USAGE_ERROR, False, ExitCode.PYTEST_USAGE),  # a refused folder, a misspelled option
    (pytest.ExitCode.NO_TESTS_COLLECTED, False, ExitCode.PYTEST_USAGE),  # an empty selection
    (ExitCode.WORSE, False, ExitCode.WORSE),
])
def test_a_benchmark_sessions_pytest_status_is_the_tables(status, stopped, expected):
    assert of_pytest_session(status, stopped) == expected


def test_the_codes_keep_their_numbers():
    # Scripts and CI jobs test these numbers: changing one is a breaking change. WORSE moved from 4 (pytest's
    # own usage error, which a plugin cannot renumber) to 6, so that no number means two things.
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4, 6, 130]


@pytest.mark.parametrize("page", ["README.md", "docs/running.md"])
def test_the_docs_exit_code_tables_are_the_enums(page):
    from pathlib import Path

    from apibank_bench.core.exit_codes import markdown_table

    text = (Path(__file__).resolve().parents[1] / page).read_text()
    start, end = "<!-- exit codes: start -->\n", "\n<!-- exit codes: end -->"
    table = text[text.index(start) + len(start):text.index(end)]
    assert table.strip() == markdown_table().strip(), (
        f"{page}'s exit-code table differs from the enum: paste `python -m apibank_bench.core.exit_codes`")


def test_ctrl_c_under_pytest_exits_130_not_pytests_2(tmp_path):
    # pytest's own 2 (interrupted) would read, in the table, as `run`'s usage error.
    import os
    import signal
    import subprocess
    import sys
    import time

    from apibank_bench.core.paths import PROJECT_ROOT
    from openai_stub import OpenAIStub, Reply

    with OpenAIStub(default=Reply(delay=60)) as stub:
        run = subprocess.Popen([sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-p",
                                "no:cacheprovider", "--apibank-out-dir", str(tmp_path), "--apibank-model", "stub",
                                "--apibank-base-url", stub.url, "--apibank-no-cache", "--apibank-limit", "1"],
                               cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 120
            while not stub.active and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            os.killpg(run.pid, signal.SIGINT)
            out = run.communicate(timeout=120)[0]
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    assert run.returncode == ExitCode.INTERRUPTED, out[-3000:]
