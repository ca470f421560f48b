"""The output contract: read one `[ApiName(key=value, ...)]` call out of a model's answer.

The answer is hostile input. It is only ever parsed with `ast`; nothing is
evaluated. The rules are the reference harness's, so that a score here equals
its score:

* candidates are the `[Name(` ... `]` spans found by balancing brackets and
  quotes (so brackets inside string values and nested lists are fine);
* the chosen candidate is the *last* one that is syntactically a call with
  keyword arguments only; if none is, the last candidate (and its error) stands;
* values are Python literals (`ast.literal_eval`), and a bare name reads as its
  own string (`x=hello` gives "hello"); a string that itself looks like a
  list/dict/tuple literal is read as that literal (the reference's
  normalization).

Quirk kept from the reference: choosing a candidate only checks its shape, so a
final draft whose values are not literals (`x=f()`, `x=a.b`, `**kw`) is chosen
and then fails, even if an earlier draft was fine.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from .tasks import normalize_params

_CALL_RE = re.compile(r"\[(?P<name>[A-Za-z_]\w*)\((?P<args>.*?)\)\]", re.DOTALL)
_CALL_START_RE = re.compile(r"\[[A-Za-z_]\w*\(")


class ParseError(ValueError):
    """The answer holds no usable call; the message says why."""


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def candidates(text: str) -> list[str]:
    """Every balanced `[Name(...)...]` span, in order of its start."""
    found: list[str] = []
    for match in _CALL_START_RE.finditer(text):
        start = match.start()
        square = paren = 0
        quote: str | None = None
        escaped = False
        for index in range(start, len(text)):
            char = text[index]
            if quote is not None:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == quote:
                    quote = None
            elif char in "'\"":
                quote = char
            elif char == "[":
                square += 1
            elif char == "]":
                square -= 1
                if square == 0 and paren == 0:
                    found.append(text[start : index + 1].strip())
                    break
            elif char == "(":
                paren += 1
            elif char == ")":
                paren = max(0, paren - 1)
    return found


def _call_node(args_text: str) -> ast.Call:
    """The `ast.Call` for the argument text, or ParseError."""
    try:
        node = ast.parse(f"_f({args_text})", mode="eval").body
    except SyntaxError as exc:
        raise ParseError(f"invalid API call syntax: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # absurdly nested or NUL bytes
        raise ParseError(f"invalid API call syntax: {type(exc).__name__}") from None
    # Quirk kept from the reference: only the outermost call is read, so `[F(a=1)(b=2)]`
    # (argument text `a=1)(b=2`, parsed as `_f(a=1)(b=2)`) reads as F(b=2).
    if not isinstance(node, ast.Call):
        raise ParseError("API call must use keyword arguments only")
    if node.args:
        raise ParseError("API call must use keyword arguments only (positional argument found)")
    return node


def _has_call_shape(candidate: str) -> bool:
    match = _CALL_RE.fullmatch(candidate)
    if not match:
        return False
    args_text = match.group("args").strip()
    if not args_text:
        return True
    try:
        _call_node(args_text)
    except ParseError:
        return False
    return True


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise ParseError(f"unsupported argument expression: {type(node).__name__}") from None


def select_call(text: str) -> str:
    """The candidate the scorer reads: the last one shaped like a keyword-only call."""
    found = candidates(text)
    for candidate in reversed(found):
        if _has_call_shape(candidate):
            return candidate
    return found[-1] if found else text.strip()


def parse_call(text: str | None) -> ParsedCall:
    """Parse a raw model answer into a call, or raise ParseError saying why."""
    if text is None:
        raise ParseError("empty answer")
    if not isinstance(text, str):
        raise ParseError(f"answer is not text ({type(text).__name__})")
    chosen = select_call(text)
    match = _CALL_RE.fullmatch(chosen)
    if not match:
        raise ParseError("no [ApiName(...)] call found")
    args_text = match.group("args").strip()
    if not args_text:
        return ParsedCall(match.group("name"), {})
    arguments: dict[str, Any] = {}
    for keyword in _call_node(args_text).keywords:
        if keyword.arg is None:
            raise ParseError("**kwargs are not supported in API calls")
        arguments[keyword.arg] = _value(keyword.value)
    return ParsedCall(match.group("name"), normalize_params(arguments))
