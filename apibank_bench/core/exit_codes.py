"""The exit codes of `apibank-bench run` and of `pytest bench_tests`, declared once: one table, where no
number means two things under either. `run` returns them; the pytest plugin turns a benchmark session's
pytest status into them (`of_pytest_session`); `run --help` and the docs' table are written from their
meanings. `sweep` and `merge` use the same numbers for the same outcomes.

Two numbers are fixed by the tools underneath: a usage error is 2 under `run` (argparse's) and 4 under
pytest (pytest's own, also for a misspelled option, which pytest refuses before any plugin runs). So
"significantly worse than the baseline" cannot be 4, and pytest's 2 (interrupted) becomes 130."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """An exit status of `apibank-bench run` or `pytest bench_tests`, with what it means to a user (`meaning`)."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    OK = 0, ("every selected instance has a scored answer (under `run` wrong answers are results, not failures; "
             "under pytest a wrong answer fails its test: 1)")
    INCOMPLETE = 1, ("some instances errored or did not run (the results are incomplete: `--resume` finishes "
                     "them); under pytest also a wrong answer (a failed test)")
    USAGE = 2, ("bad usage, a bad or missing data root, an empty selection, an out dir that holds another run, "
                "or a refused `--baseline` (under `run`; under pytest: 4)")
    UNREACHABLE = 3, "the model endpoint is unreachable (or pytest failed internally)"
    PYTEST_USAGE = 4, "under pytest: bad usage, as 2 under `run` (pytest's own number for it)"
    WORSE = 6, "the run is significantly worse than `--baseline` (under `run` and pytest)"
    INTERRUPTED = 130, "interrupted (Ctrl-C or SIGTERM; under pytest too, for pytest's own 2)"


#: pytest's own exit statuses (pytest.ExitCode), by number: core imports no pytest.
PYTEST_OK, PYTEST_FAILED, PYTEST_INTERRUPTED, PYTEST_INTERNAL, PYTEST_USAGE_ERROR, PYTEST_NO_TESTS = range(6)


def of_pytest_session(status: int, stopped: bool) -> int:
    """A benchmark session's exit status under pytest, in this table: pytest's interruption is 130, unless
    the run stopped itself (its circuit breaker, `-x`: incomplete, 1); no test collected is a usage error
    (an empty selection: 4). The rest are the table's already (the gate sets `WORSE`, the plugin
    `UNREACHABLE`) or pytest's own with the same meaning."""
    if status == PYTEST_INTERRUPTED:
        return ExitCode.INCOMPLETE if stopped else ExitCode.INTERRUPTED
    if status == PYTEST_NO_TESTS:
        return ExitCode.PYTEST_USAGE
    return status


def described(command: str = "run") -> str:
    """Every exit code with its meaning, as one paragraph for a command's help."""
    return f"Exit codes of `{command}`: " + "; ".join(f"{code.value} {code.meaning}" for code in ExitCode) + "."


def markdown_table() -> str:
    """The exit codes as a Markdown table, for the docs (`python -m apibank_bench.core.exit_codes`)."""
    rows = [f"| `{code.value}` | `{code.name}` | {code.meaning} |" for code in ExitCode]
    return "\n".join(["| exit | name | meaning |", "|---|---|---|", *rows])


if __name__ == "__main__":
    print(markdown_table())
