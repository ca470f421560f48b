"""The exit codes of `apibank-bench`, declared once: `run` returns them, the pytest plugin sets the one
pytest has no word for (an unreachable endpoint), and `run --help` is written from their meanings.
`sweep` and `merge` use the same numbers for the same outcomes."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """An exit status of `apibank-bench`, with what it means to a user (`meaning`)."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    OK = 0, "every selected instance has a scored answer (wrong answers are results, not failures)"
    INCOMPLETE = 1, ("some instances errored or did not run (the results are incomplete: `--resume` "
                     "finishes them)")
    USAGE = 2, ("bad usage, a bad or missing data root, an empty selection, an out dir that holds another "
                "run, or a refused `--baseline`")
    UNREACHABLE = 3, "the model endpoint is unreachable (or pytest failed internally)"
    WORSE = 4, "the run is significantly worse than `--baseline`"
    INTERRUPTED = 130, "interrupted (Ctrl-C or SIGTERM)"


def described(command: str = "run") -> str:
    """Every exit code with its meaning, as one paragraph for a command's help."""
    return f"Exit codes of `{command}`: " + "; ".join(f"{code.value} {code.meaning}" for code in ExitCode) + "."


def markdown_table() -> str:
    """The exit codes as a Markdown table, for the docs (`python -m apibank_bench.core.exit_codes`)."""
    rows = [f"| `{code.value}` | `{code.name}` | {code.meaning} |" for code in ExitCode]
    return "\n".join(["| exit | name | meaning |", "|---|---|---|", *rows])


if __name__ == "__main__":
    print(markdown_table())
