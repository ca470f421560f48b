"""The words of the command the user typed: messages name `apibank-bench`'s flags (`--resume`) under a
command, and the pytest options (`--apibank-resume`) under plain pytest.

The voice is a value of this process, set by whoever starts the work: the CLI wraps each command in
`command_voice()`; the pytest plugin gives the controller's voice to its xdist workers (`workerinput`),
which `use_voice` it. No environment variable carries it.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Literal

Voice = Literal["pytest", "command"]
_voice: Voice = "pytest"


def voice() -> Voice:
    """The voice messages speak in now."""
    return _voice


def use_voice(value: Voice) -> None:
    """Speak in `value` from now on (an xdist worker takes its controller's)."""
    global _voice
    if value not in ("pytest", "command"):
        raise ValueError(f"unknown voice {value!r}")
    _voice = value


def flag(name: str) -> str:
    """The flag of setting `name` as the user types it: `--NAME` under `apibank-bench`, else `--apibank-NAME`."""
    dashed = name.replace("_", "-")
    return f"--{dashed}" if _voice == "command" else f"--apibank-{dashed}"


def spoken(option: str) -> str:
    """A `--apibank-NAME` option in the words of the typed command (anything else unchanged)."""
    return flag(option[len("--apibank-"):]) if option.startswith("--apibank-") else option


@contextlib.contextmanager
def command_voice() -> Iterator[None]:
    """Messages name the command's flags while this lasts (the CLI wraps every command in it)."""
    old = _voice
    use_voice("command")
    try:
        yield
    finally:
        use_voice(old)
