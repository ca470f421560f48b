"""The output contract's parser: hand-picked cases and property-based tests."""

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apibank_bench.parsing import ParseError, parse_call
from apibank_bench.tasks import render_call

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


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_parse_error(text):
    try:
        parse_call(text)
    except ParseError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[]()'\"=,\\ aZ_1.{}:*", max_size=60))
def test_bracket_soup_raises_only_parse_error(text):
    try:
        parse_call(text)
    except ParseError:
        pass
