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

Finding and choosing candidates takes time near-linear in the answer's length
(a 90 KB answer of `[A(` repeated fails in 0.1-0.2 s; see
benchmarks/bench_parser.py), so a hostile answer cannot stall a run.

Quirk kept from the reference: choosing a candidate only checks its shape, so a
final draft whose values are not literals (`x=f()`, `x=a.b`, `**kw`) is chosen
and then fails, even if an earlier draft was fine.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from apibank_bench.data.tasks import normalize_params
from apibank_bench.scoring.stage import Reason

_CALL_RE = re.compile(r"\[(?P<name>[A-Za-z_]\w*)\((?P<args>.*?)\)\]", re.DOTALL)
_CALL_START_RE = re.compile(r"\[(?P<name>[A-Za-z_]\w*)\(")


class ParseError(ValueError):
    """The answer holds no usable call; the message says why, `reason` says it as a code."""

    def __init__(self, message: str, reason: Reason) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple:  # copied and pickled whole (the default passes the message alone)
        return type(self), (str(self), self.reason)


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


class _Phase:
    """Starts whose scans agree on which characters are quoted, scanned together.

    A scan from one start keeps a square count and a paren count that never goes
    below zero. Scans in one phase see the same code characters, so one running
    square sum `square` and one unclamped paren sum `paren` serve them all: a start
    remembers the square sum before it, and its clamped paren count is `paren`
    minus the lowest paren sum seen since it began. Starts are grouped by that
    lowest sum (`groups`: lowest sum -> square sum before the start -> starts), so a
    `]` ends exactly the starts in `groups[paren][square]`, and a `)` moves at
    most one group. Merging always moves the smaller side, so the whole scan is
    O(n log n) at worst instead of one full rescan per start.
    """

    __slots__ = ("quote", "escaped", "square", "paren", "groups", "size")

    def __init__(self) -> None:
        self.quote: str | None = None
        self.escaped = False
        self.square = 0
        self.paren = 0
        self.groups: dict[int, _Group] = {}
        self.size = 0

    def add(self, start: int) -> None:
        self.groups.setdefault(self.paren, _Group()).put(self.square, [start])
        self.size += 1

    def step(self, char: str, index: int, ends: list[tuple[int, int]]) -> None:
        if self.quote is not None:
            if self.escaped:
                self.escaped = False
            elif char == "\\":
                self.escaped = True
            elif char == self.quote:
                self.quote = None
        elif char in "'\"":
            self.quote = char
        elif char == "[":
            self.square += 1
        elif char == "]":
            self.square -= 1
            group = self.groups.get(self.paren)
            done = group.pop(self.square, None) if group else None
            if group is not None and done:
                ends.extend((start, index) for start in done)
                group.size -= len(done)
                self.size -= len(done)
                if not group:
                    del self.groups[self.paren]
        elif char == "(":
            self.paren += 1
        elif char == ")":
            self.paren -= 1
            lifted = self.groups.pop(self.paren + 1, None)
            if lifted:  # these starts had paren count 1 and now have 0 like the group below
                self.groups[self.paren] = _merge(self.groups.get(self.paren), lifted)

    def absorb(self, other: "_Phase") -> None:
        """Take over the starts of a phase that is now in the same quote state."""
        shift_paren, shift_square = self.paren - other.paren, self.square - other.square
        for low, group in other.groups.items():
            moved = _Group()
            for square, starts in group.items():
                moved.put(square + shift_square, starts)
            self.groups[low + shift_paren] = _merge(self.groups.get(low + shift_paren), moved)
        self.size += other.size


class _Group(dict):
    """Square sum before a start -> the starts; `size` counts them all."""

    size = 0

    def put(self, square: int, starts: list[int]) -> None:
        self.setdefault(square, []).extend(starts)
        self.size += len(starts)


def _merge(into: _Group | None, extra: _Group) -> _Group:
    """Union of two groups, copying the smaller one into the larger one."""
    if not into:
        return extra
    if into.size < extra.size:
        into, extra = extra, into
    for square, starts in extra.items():
        into.put(square, starts)
    return into


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced `[Name(...)...]` span, in order of its start.

    A span starts at each `[Name(`; from there a scan counts square brackets and
    parentheses outside quotes (a backslash escapes the next character in a quote;
    a `)` never takes the paren count below zero) and the span ends at the first
    `]` that brings both counts to zero. Spans may nest or overlap.
    """
    starts = {match.start() for match in _CALL_START_RE.finditer(text)}
    if not starts:
        return []
    phases: list[_Phase] = []
    ends: list[tuple[int, int]] = []
    for index, char in enumerate(text):
        if index in starts:
            home = next((phase for phase in phases if phase.quote is None), None)
            if home is None:
                home = _Phase()
                phases.append(home)
            home.add(index)
        if not phases:
            continue
        for phase in phases:
            phase.step(char, index, ends)
        if len(phases) > 1 or not phases[0].size:
            phases = _distinct(phases)
    ends.sort()
    return ends


def _distinct(phases: list[_Phase]) -> list[_Phase]:
    """Drop phases with no starts left and merge phases in the same quote state."""
    kept: dict[tuple[str | None, bool], _Phase] = {}
    for phase in phases:
        if not phase.size:
            continue
        state = (phase.quote, phase.escaped)
        other = kept.get(state)
        if other is None:
            kept[state] = phase
        elif other.size >= phase.size:
            other.absorb(phase)
        else:
            phase.absorb(other)
            kept[state] = phase
    return list(kept.values())


def candidates(text: str) -> list[str]:
    """Every balanced `[Name(...)...]` span, in order of its start."""
    return [text[start : end + 1] for start, end in _spans(text)]


def _call_node(args_text: str) -> ast.Call:
    """The `ast.Call` for the argument text, or ParseError."""
    try:
        node = ast.parse(f"_f({args_text})", mode="eval").body
    except SyntaxError as exc:
        raise ParseError(f"invalid API call syntax: {exc.msg}", Reason.PARSE_SYNTAX) from None
    except (RecursionError, MemoryError, ValueError) as exc:  # absurdly nested or NUL bytes
        raise ParseError(f"invalid API call syntax: {type(exc).__name__}", Reason.PARSE_SYNTAX) from None
    # Quirk kept from the reference: only the outermost call is read, so `[F(a=1)(b=2)]`
    # (argument text `a=1)(b=2`, parsed as `_f(a=1)(b=2)`) reads as F(b=2).
    if not isinstance(node, ast.Call):
        raise ParseError("API call must use keyword arguments only", Reason.PARSE_SYNTAX)
    if node.args:
        raise ParseError("API call must use keyword arguments only (positional argument found)",
                         Reason.PARSE_POSITIONAL)
    return node


def _args_text(text: str, start: int, end: int) -> str | None:
    """The argument text of the span text[start : end + 1], or None unless it ends in `)]`."""
    if text[end - 1] != ")":
        return None
    return text[_call_start(text, start).end() : end - 1].strip()


def _call_start(text: str, start: int) -> re.Match[str]:
    """The `[Name(` that a span starts with (every span does)."""
    match = _CALL_START_RE.match(text, start)
    assert match is not None, "a span starts with [Name("
    return match


def _nesting_limit() -> int | None:
    """How deep brackets may nest inside `_f(...)` before Python refuses to parse.

    Probed, not assumed, so the shortcut in `_surely_too_deep` follows this
    interpreter (None turns the shortcut off).
    """
    depth = 200
    try:
        ast.parse(f"_f({'[' * depth}{']' * depth})", mode="eval")
    except SyntaxError:
        return depth
    return None


_TOO_DEEP = _nesting_limit()
_HIDES_BRACKETS = re.compile(r"['\"#\\]")  # quotes and comments hide brackets from Python
_BRACKET_DELTA = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


class _Depths:
    """Answers "must Python reject `_f(text[start:end])` for nesting too deep?" in O(log n).

    Nested spans (`[A(x[A(x...`) would each need a parse that fails only after
    hundreds of levels: quadratic work. Up to the first quote, comment or
    backslash Python sees every bracket, and its bracket level never drops below
    zero without an error; so if somewhere in that stretch the openers outnumber
    the closers by the limit, the parse fails. Only a "yes" is trusted; a "no"
    leaves the decision to the real parse.
    """

    def __init__(self, text: str) -> None:
        self.level = [0, *accumulate(_BRACKET_DELTA.get(char, 0) for char in text)]
        self.hidden = [match.start() for match in _HIDES_BRACKETS.finditer(text)]

    def too_deep(self, start: int, end: int) -> bool:
        if _TOO_DEEP is None:
            return False
        following = bisect_left(self.hidden, start)
        stop = min(end, self.hidden[following]) if following < len(self.hidden) else end
        base, reach = self.level[start], 256
        while True:  # a few probes at doubling distances, then the end of the stretch
            probe = min(stop, start + reach)
            if self.level[probe] - base >= _TOO_DEEP:
                return True
            if probe == stop:
                return False
            reach *= 2


def _call_shape(args_text: str | None) -> ast.Call | bool:
    """The call node of argument text shaped like a keyword-only call (True: empty arguments), else False."""
    if args_text is None:
        return False
    if not args_text:
        return True
    try:
        return _call_node(args_text)
    except ParseError:
        return False


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise ParseError(f"unsupported argument expression: {type(node).__name__}", Reason.PARSE_VALUE) from None


def _chosen(text: str) -> tuple[int, int, ast.Call | bool] | None:
    """The span the scorer reads, with its `_call_shape`: the last span shaped like a keyword-only
    call, else the last span (shape False)."""
    spans = _spans(text)
    depths = _Depths(text) if len(spans) > 1 else None
    for start, end in reversed(spans):
        if depths and text[end - 1] == ")" and depths.too_deep(_call_start(text, start).end(), end - 1):
            continue
        shape = _call_shape(_args_text(text, start, end))
        if shape:
            return start, end, shape
    return (*spans[-1], False) if spans else None


def select_call(text: str) -> str:
    """The candidate the scorer reads (the whole answer, stripped, if there is none)."""
    span = _chosen(text)
    return text[span[0] : span[1] + 1] if span else text.strip()


def parse_call(text: str | None) -> ParsedCall:
    """Parse a raw model answer into a call, or raise ParseError saying why."""
    if text is None:
        raise ParseError("empty answer", Reason.PARSE_EMPTY)
    if not isinstance(text, str):
        raise ParseError(f"answer is not text ({type(text).__name__})", Reason.PARSE_EMPTY)
    chosen = _chosen(text)
    node = None
    if chosen is None:  # no balanced span, but the whole answer may still look like a call
        match = _CALL_RE.fullmatch(text.strip())
        name, args_text = (match.group("name"), match.group("args").strip()) if match else (None, None)
    else:
        start, end, shape = chosen
        name, args_text = _call_start(text, start).group("name"), _args_text(text, start, end)
        node = shape if isinstance(shape, ast.Call) else None  # parsed once, while choosing
    if args_text is None or name is None:  # (a name comes with argument text)
        raise ParseError("no [ApiName(...)] call found", Reason.PARSE_NO_CALL if text.strip() else Reason.PARSE_EMPTY)
    if not args_text:
        return ParsedCall(name, {})
    arguments: dict[str, Any] = {}
    for keyword in (node or _call_node(args_text)).keywords:
        if keyword.arg is None:
            raise ParseError("**kwargs are not supported in API calls", Reason.PARSE_KWARGS)
        arguments[keyword.arg] = _value(keyword.value)
    return ParsedCall(name, normalize_params(arguments))
