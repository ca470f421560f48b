"""The output contract's parser: hand-picked cases and property-based tests."""

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apibank_bench.scoring import parsing
from apibank_bench.scoring.parsing import ParseError, parse_call
from apibank_bench.data.tasks import render_call

# -- examples -------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, name, arguments",
    [
        ("[GetUserToken(username='a', password=\"b\")]", "GetUserToken", {"username": "a", "password": "b"}),
        ("[F(x=hello)]", "F", {"x": "hello"}),  # a bare name reads as its string
        ("[F(n=3, f=2.5, t=True, z=None)]", "F", {"n": 3, "f": 2.5, "t": True, "z": None}),
        ("[F(xs=['a', ['b']], d={'k': 'v'})]", "F", {"xs": ["a", ["b"]], "d": {"k": "v"}}),
        ("[F(s='a]b)c[d(')]", "F", {"s": "a]b)c[d("}),
        ("[F(xs='[1, 2]')]", "F", {"xs": [1, 2]}),  # the reference's normalization of list-like strings
        ("[F()]", "F", {}),
        ("Sure! [A(x=1)] no wait, [B(y=2)] is right.", "B", {"y": 2}),
        ("```\n[A(x=1)]\n```", "A", {"x": 1}),
        ("[A(x=1)] then [B(2)]", "A", {"x": 1}),  # the last *parseable* candidate
        ("[F(a=1)(b=2)]", "F", {"b": 2}),  # the reference's quirk: only the outermost call is read
    ],
)
def test_parses(answer, name, arguments):
    call = parse_call(answer)
    assert (call.name, call.arguments) == (name, arguments)


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("no call here", "no [ApiName(...)] call found"),
        ("[F('positional')]", "keyword arguments only"),
        ("[F(**kw)]", "**kwargs"),
        ("[F(x=open('f'))]", "unsupported argument expression"),
        ("[F(x=os.system)]", "unsupported argument expression"),
        ("[F(x=1 +)]", "invalid API call syntax"),
        ("[F(x=1, =2)]", "invalid API call syntax"),
        ("[A(x=1)] and [B(x=y.z)]", "unsupported argument expression"),  # the reference's quirk
        (None, "empty answer"),
    ],
)
def test_rejects_with_a_reason(answer, reason):
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_call(answer)


def test_never_executes_code(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ParseError):
        parse_call(f"[F(x=__import__('pathlib').Path({str(marker)!r}).touch())]")
    assert not marker.exists()


# -- properties -------------------------------------------------------------------

names = st.from_regex(r"[A-Z][A-Za-z0-9_]{0,15}", fullmatch=True)
keys = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda key: key not in {"None", "True", "False"} and not __import__("keyword").iskeyword(key))
# Strings that the reference's normalization leaves alone (not starting with a bracket).
texts = st.text(alphabet=string.printable, max_size=20).filter(lambda s: s[:1] not in "[{(")
scalars = st.one_of(texts, st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(texts, inner, max_size=3)), max_leaves=8)
calls = st.tuples(names, st.dictionaries(keys, values, max_size=4))
prose = st.text(alphabet=string.ascii_letters + " .,!?\n", max_size=40)


@settings(max_examples=300, deadline=None)
@given(calls)
def test_round_trip(call):
    name, arguments = call
    parsed = parse_call(render_call(name, arguments))
    assert (parsed.name, parsed.arguments) == (name, arguments)


@settings(max_examples=200, deadline=None)
@given(calls, calls, prose, prose, st.booleans())
def test_surroundings_and_earlier_drafts_do_not_matter(call, draft, before, after, fenced):
    final = render_call(*call)
    answer = f"{before}\n{render_call(*draft)}\n{before}\n" + (f"```\n{final}\n```" if fenced else final) + after
    parsed = parse_call(answer)
    assert (parsed.name, parsed.arguments) == call




# -- the span scan against a plain rescan from every start ---------------------------

def rescan_spans(text):
    """The specification of `_spans`: scan afresh from every `[Name(` (quadratic)."""
    found = []
    for match in re.finditer(r"\[[A-Za-z_]\w*\(", text):
        square = paren = 0
        quote, escaped = None, False
        for index in range(match.start(), len(text)):
            char = text[index]
            if quote is not None:
                escaped, quote = (False, quote) if escaped else (char == "\\", None if char == quote else quote)
            elif char in "'\"":
                quote = char
            elif char in "[]":
                square += 1 if char == "[" else -1
                if char == "]" and square == 0 and paren == 0:
                    found.append((match.start(), index))
                    break
            elif char in "()":
                paren = paren + 1 if char == "(" else max(0, paren - 1)
    return found


hostile_pieces = st.sampled_from(["[A(", "[B(x=", ")]", "(", ")", "[", "]", "'", '"', "\\", "#", "\n", "x", "=1,", "{", "}"])
hostile = st.lists(st.tuples(hostile_pieces, st.integers(1, 220)), max_size=6).map(
    lambda runs: "".join(piece * count for piece, count in runs))


@settings(max_examples=200, deadline=None)
@given(st.one_of(hostile, st.text(alphabet="[]()'\"\\#=,xA\n", max_size=80)))
def test_spans_equal_a_rescan_from_every_start(text):
    assert parsing._spans(text) == rescan_spans(text)


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.text(max_size=200), st.text(alphabet="[]()'\"=,\\ aZ_1.{}:*", max_size=60), hostile))
def test_any_text_raises_only_parse_error(text):
    """Arbitrary text, bracket soup and hostile runs: a call or a ParseError, never anything else."""
    try:
        parse_call(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(hostile, st.integers(0, 400))
def test_too_deep_is_only_said_of_what_python_rejects(text, start):
    start = min(start, len(text))
    if parsing._Depths(text).too_deep(start, len(text)):
        with pytest.raises(ParseError):
            parsing._call_node(text[start:].strip())


@pytest.mark.parametrize("answer", ["[A(" * 3000, "[A(x" * 3000 + ")]" * 3000, "[A(]" * 3000 + ")" * 3000 + "[]"])
def test_adversarial_nesting_is_rejected(answer):
    with pytest.raises(ParseError):
        parse_call(answer)


def test_deep_nesting_below_pythons_limit_still_parses():
    answer = "[A(x=" + "[" * 150 + "1" + "]" * 150 + ")]"
    assert parse_call(answer).name == "A"
