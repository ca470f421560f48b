"""A GBNF grammar that lets the model write exactly one API call.

The output it allows is `[ApiName(param='value', ...)]` where ApiName is one of
the visible APIs and the keywords are that API's own input parameters, each at
most once and in the order the spec lists them (any subset, so optional
parameters may be left out). Values are single-quoted strings, numbers (no
leading zeros, which Python rejects), True/False, and lists whose items are
strings, numbers or flat dicts of those (gold calls such as RecordHealthData's
`health_data=[{'name': ..., 'value': ...}]` need dicts).

Every rule is unambiguous (one continuation per character) and bounded, so an
answer is at most a few hundred tokens whatever the model does: llama.cpp checks
the whole vocabulary (262k tokens for Gemma 3) against the grammar at every
step, and an unbounded list or string let the 270M model repeat itself until
`max_tokens` (1,024 tokens, minutes on 2 cores). The bounds come from the data:
a string holds at most `MAX_STRING` printable ASCII characters (the longest gold
string is 135, and no gold value has a character outside printable ASCII;
escapes limited to \\\\ \\' \\" \\n \\t so Python reads them), a list or dict
at most `MAX_ITEMS` entries (gold: 3 and 2), a number at most 12 integer and 6
fraction digits.

With `typed=True` (the default) each parameter takes the values its declared
type allows: `str` a string; `int`/`float` a number or a string; `bool`
True, False or a string; `list`/`list(str)` a list or a string; other types
any value. Everything the grammar accepts parses with `ast` as one call.

The same text works as llama.cpp GBNF and as vLLM's (xgrammar) grammar;
`grammar_extra_body` wraps it in the request field each server kind expects.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from apibank_bench.llm.config import AUTO, SERVER_KINDS

#: Longest string value, in characters (the longest gold string is a 135-character URL).
MAX_STRING = 140
#: Most items in a list, and pairs in a dict (gold: 3 and 2).
MAX_ITEMS = 8

# Shared value rules (GBNF). Python literal syntax, so `ast.literal_eval` reads each value. `{m,n}`
# is llama.cpp's bounded repetition (nested optional rules, which its sampler handles in linear time).
_VALUE_RULES = rf"""
value ::= string | number | list | bool
v-str ::= string
v-num ::= number | string
v-bool ::= bool | string
v-list ::= list | string
string ::= "'" char{{0,{MAX_STRING}}} "'"
char ::= [ -&(-\[\]-~] | "\\" ['"\\nt]
number ::= "-"? ("0" | [1-9] [0-9]{{0,11}}) ("." [0-9]{{1,6}})?
list ::= "[" (item (sep item){{0,{MAX_ITEMS - 1}}})? "]"
item ::= string | number | dict
dict ::= "{{" (pair (sep pair){{0,{MAX_ITEMS - 1}}})? "}}"
pair ::= string ":" " "? (string | number | bool)
bool ::= "True" | "False"
sep ::= "," " "?
"""

# Declared parameter type (as in api_specs.json) -> value rule; anything else takes `value`.
_TYPED_RULES = {"str": "v-str", "int": "v-num", "float": "v-num", "bool": "v-bool",
                "list": "v-list", "list(str)": "v-list"}


def _literal(text: str) -> str:
    """A GBNF double-quoted literal (json escaping is a valid subset for identifiers)."""
    return json.dumps(text, ensure_ascii=False)


def _params(spec: Mapping[str, Any], typed: bool) -> list[tuple[str, str]]:
    """(name, value rule) of each usable input parameter, in spec order."""
    params = spec.get("input_parameters") or {}
    if not isinstance(params, Mapping):
        params = {name: {} for name in params}
    out = []
    for name, info in params.items():
        # A name that is not an identifier could never appear in a parseable call.
        if isinstance(name, str) and name.isidentifier():
            kind = info.get("type") if typed and isinstance(info, Mapping) else None
            out.append((name, _TYPED_RULES.get(kind, "value") if isinstance(kind, str) else "value"))
    return out


def call_grammar(specs: Iterable[Mapping[str, Any]], *, typed: bool = True) -> str:
    """GBNF for one bracketed call to one of `specs`.

    Each spec is a dict with `name` and `input_parameters` (a dict keyed by
    parameter name with a `type`, as in data/api_specs.json, or a list of names).
    """
    apis: list[tuple[str, list[tuple[str, str]]]] = []
    seen: set[str] = set()
    for spec in specs:
        name = spec["name"]
        if name.isidentifier() and name not in seen:
            seen.add(name)
            apis.append((name, _params(spec, typed)))
    if not apis:
        raise ValueError("call_grammar needs at least one API with an identifier name")

    lines = ["root ::= \"[\" call \"]\"", "call ::= " + " | ".join(f"api{i}" for i in range(len(apis)))]
    for i, (name, params) in enumerate(apis):
        if not params:
            lines.append(f"api{i} ::= {_literal(name + '(')} \")\"")
            continue
        first = " | ".join(f"api{i}-p{j}" for j in range(len(params)))
        lines.append(f"api{i} ::= {_literal(name + '(')} ({first})? \")\"")
        # api{i}-p{j}: parameter j, then optionally any later parameter (ordered subset).
        for j, (param, rule) in enumerate(params):
            rest = " | ".join(f"api{i}-p{k}" for k in range(j + 1, len(params)))
            tail = f" (sep ({rest}))?" if rest else ""
            lines.append(f"api{i}-p{j} ::= {_literal(param + '=')} {rule}{tail}")
    return "\n".join(lines) + "\n" + _VALUE_RULES.lstrip("\n")


def grammar_extra_body(grammar: str, server_kind: str = "llama.cpp") -> dict[str, Any]:
    """The request `extra_body` that carries `grammar` for a server kind.

    - "llama.cpp": `{"grammar": ...}` (llama-cpp-python's server and llama.cpp's llama-server)
    - "vllm": `{"guided_grammar": ...}` (vLLM guided decoding, before v0.12)
    - "vllm-structured": `{"structured_outputs": {"grammar": ...}}` (vLLM v0.12 and later)
    - any other kind (`openai`, `none`, `sglang`): `{}` (no grammar field: the request is unconstrained)
    """
    if server_kind == "llama.cpp":
        return {"grammar": grammar}
    if server_kind == "vllm":
        return {"guided_grammar": grammar}
    if server_kind == "vllm-structured":
        return {"structured_outputs": {"grammar": grammar}}
    if server_kind in SERVER_KINDS or server_kind == AUTO:
        return {}
    raise ValueError(f"unknown server kind {server_kind!r}")


def call_extra_body(
    specs: Iterable[Mapping[str, Any]], server_kind: str = "llama.cpp", *, typed: bool = True
) -> dict[str, Any]:
    """Shortcut: the grammar for `specs`, wrapped for `server_kind`."""
    kind = SERVER_KINDS.get(server_kind)
    if kind is not None and not kind.grammar or server_kind == AUTO:
        return {}  # no grammar field for this server (an unknown kind is refused below)
    return grammar_extra_body(call_grammar(specs, typed=typed), server_kind)
