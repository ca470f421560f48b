"""The words of the command the user typed: messages name `apibank-bench`'s flags (`--resume`) under a
command, and the pytest options (`--apibank-resume`) under plain pytest."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

#: Set (to "command") while an `apibank-bench` command runs, and inherited by the pytest it starts
#: and that pytest's xdist workers: messages then name `run`'s flags (`--resume`), and under plain
#: pytest the pytest options (`--apibank-resume`).
VOICE_ENV = "APIBANK_VOICE"


def flag(name: str) -> str:
    """The flag of setting `name` as the user types it: `--NAME` under `apibank-bench`, else `--apibank-NAME`."""
    dashed = name.replace("_", "-")
    return f"--{dashed}" if os.environ.get(VOICE_ENV) == "command" else f"--apibank-{dashed}"


def spoken(option: str) -> str:
    """A `--apibank-NAME` option in the words of the typed command (anything else unchanged)."""
    return flag(option[len("--apibank-"):]) if option.startswith("--apibank-") else option


@contextlib.contextmanager
def command_voice() -> Iterator[None]:
    """Messages name the command's flags while this lasts (the CLI wraps every command in it)."""
    old = os.environ.get(VOICE_ENV)
    os.environ[VOICE_ENV] = "command"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(VOICE_ENV, None)
        else:
            os.environ[VOICE_ENV] = old

