"""A tiny GBNF recognizer and sampler for tests (the subset call_grammar emits).

Supports: `name ::= ...` rules, "literals", [classes] (with ^, ranges and
backslash escapes), rule references, ( groups ), |, and the postfix operators
* + ? {m,n} {n}. `matches(grammar, text)` says whether `root` derives exactly `text`;
`sample(grammar, rng)` draws a random string from the grammar; `parse_call`
reads `[Name(k=literal, ...)]` with `ast` (never eval).
"""

from __future__ import annotations

import ast
import random
import re
from functools import lru_cache

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "[": "[", "]": "]", "^": "^", "-": "-"}


def _unescape(text: str, i: int) -> tuple[str, int]:
    """Character at text[i] (handling a backslash escape) and the next index."""
    if text[i] == "\\":
        return _ESCAPES[text[i + 1]], i + 2
    return text[i], i + 1


def _tokenize(src: str) -> list[tuple[str, object]]:
    tokens: list[tuple[str, object]] = []
    i = 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c == "#":
            i = src.index("\n", i) if "\n" in src[i:] else len(src)
        elif src.startswith("::=", i):
            tokens.append(("def", None))
            i += 3
        elif c == '"':
            i += 1
            chars = []
            while src[i] != '"':
                ch, i = _unescape(src, i)
                chars.append(ch)
            tokens.append(("lit", "".join(chars)))
            i += 1
        elif c == "[":
            i += 1
            negated = src[i] == "^"
            i += negated
            ranges = []
            while src[i] != "]":
                lo, i = _unescape(src, i)
                hi = lo
                if src[i] == "-" and src[i + 1] != "]":
                    hi, i = _unescape(src, i + 1)
                ranges.append((lo, hi))
            tokens.append(("cls", (negated, tuple(ranges))))
            i += 1
        elif c in "()|*+?":
            tokens.append((c, None))
            i += 1
        elif c == "{":
            m = re.compile(r"\{(\d+)(?:,(\d+))?\}").match(src, i)
            if not m:
                raise ValueError(f"bad repetition at {src[i:i + 20]!r}")
            low = int(m.group(1))
            tokens.append(("{", (low, int(m.group(2)) if m.group(2) else low)))
            i = m.end()
        else:
            m = re.compile(r"[A-Za-z0-9-]+").match(src, i)
            if not m:
                raise ValueError(f"bad grammar at {src[i:i + 20]!r}")
            tokens.append(("name", m.group()))
            i = m.end()
    return tokens


def parse(src: str) -> dict[str, tuple]:
    """Rules as nested tuples: ('alt', [...]), ('seq', [...]), ('lit', s), ('cls', ...), ('ref', n), ('rep', node, min, max)."""
    tokens = _tokenize(src)
    rules: dict[str, tuple] = {}
    pos = 0

    def at_rule_start(k: int) -> bool:
        return k + 1 < len(tokens) and tokens[k][0] == "name" and tokens[k + 1][0] == "def"

    def alt() -> tuple:
        nonlocal pos
        options = [seq()]
        while pos < len(tokens) and tokens[pos][0] == "|":
            pos += 1
            options.append(seq())
        return ("alt", options)

    def seq() -> tuple:
        nonlocal pos
        items = []
        while pos < len(tokens) and tokens[pos][0] not in ("|", ")") and not at_rule_start(pos):
            kind, val = tokens[pos]
            pos += 1
            if kind == "(":
                node = alt()
                assert tokens[pos][0] == ")"
                pos += 1
            elif kind == "name":
                node = ("ref", val)
            else:
                node = (kind, val)
            while pos < len(tokens) and tokens[pos][0] in ("*", "+", "?", "{"):
                op, bounds = tokens[pos]
                pos += 1
                if op == "{":
                    node = ("rep", node, *bounds)
                else:
                    node = ("rep", node, 1 if op == "+" else 0, 1 if op == "?" else None)
            items.append(node)
        return ("seq", items)

    while pos < len(tokens):
        assert at_rule_start(pos), tokens[pos]
        name = tokens[pos][1]
        pos += 2
        rules[name] = alt()
    return rules


def _in_class(spec, ch: str) -> bool:
    negated, ranges = spec
    inside = any(lo <= ch <= hi for lo, hi in ranges)
    return inside != negated


def matches(grammar: str, text: str) -> bool:
    rules = parse(grammar)

    @lru_cache(maxsize=None)
    def ends(node_id: int, start: int) -> frozenset[int]:
        return frozenset(_ends(nodes[node_id], start))

    nodes: list[tuple] = []
    ids: dict[int, int] = {}

    def nid(node: tuple) -> int:
        if id(node) not in ids:
            ids[id(node)] = len(nodes)
            nodes.append(node)
        return ids[id(node)]

    def _ends(node: tuple, start: int) -> set[int]:
        kind = node[0]
        if kind == "lit":
            return {start + len(node[1])} if text.startswith(node[1], start) else set()
        if kind == "cls":
            return {start + 1} if start < len(text) and _in_class(node[1], text[start]) else set()
        if kind == "ref":
            return set(ends(nid(rules[node[1]]), start))
        if kind == "alt":
            out: set[int] = set()
            for option in node[1]:
                out |= ends(nid(option), start)
            return out
        if kind == "seq":
            current = {start}
            for item in node[1]:
                current = {e for p in current for e in ends(nid(item), p)}
            return current
        if kind == "rep":
            _, inner, lo, hi = node
            out = {start} if lo == 0 else set()
            frontier, count = {start}, 0
            while frontier and (hi is None or count < hi):  # positions grow, so this ends
                frontier = {e for p in frontier for e in ends(nid(inner), p) if e != p}
                count += 1
                if count >= lo:
                    out |= frontier
            return out
        raise AssertionError(kind)

    return len(text) in ends(nid(rules["root"]), 0)


def sample(grammar: str, rng: random.Random, max_repeat: int = 4) -> str:
    """A random string of the grammar (characters of negated classes drawn from a test alphabet)."""
    rules = parse(grammar)
    alphabet = "abcXYZ019 -:.,@/'\"\\\n\té€😀[]()="

    def gen(node: tuple) -> str:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "cls":
            candidates = [ch for ch in alphabet if _in_class(node[1], ch)]
            if not node[1][0]:
                candidates += [lo for lo, _ in node[1][1]]
            return rng.choice(candidates)
        if kind == "ref":
            return gen(rules[node[1]])
        if kind == "alt":
            return gen(rng.choice(node[1]))
        if kind == "seq":
            return "".join(gen(item) for item in node[1])
        if kind == "rep":
            _, inner, lo, hi = node
            count = rng.randint(lo, min(hi, lo + max_repeat) if hi is not None else lo + max_repeat)
            return "".join(gen(inner) for _ in range(count))
        raise AssertionError(kind)

    return gen(rules["root"])


def parse_call(text: str) -> tuple[str, dict]:
    """`[Name(k=literal, ...)]` -> (Name, {k: value}); raises on anything else."""
    tree = ast.parse(text, mode="eval").body
    if not (isinstance(tree, ast.List) and len(tree.elts) == 1):
        raise ValueError(f"not one bracketed call: {text!r}")
    call = tree.elts[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args):
        raise ValueError(f"not a keyword-only call: {text!r}")
    return call.func.id, {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
