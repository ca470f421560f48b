"""The call grammar: what it accepts parses as one allowed call; what it rejects."""

from __future__ import annotations

import random

import pytest

from apibank_bench.llm import call_extra_body, call_grammar, grammar_extra_body
from apibank_bench.specs import LEVEL3, LEVEL12, specs
from gbnf_check import matches, parse_call, sample


L12 = specs(LEVEL12)
VISIBLE = [L12["AddAgenda"], L12["GetToday"], L12["ToolSearcher"], L12["QueryHistoryToday"]]
GRAMMAR = call_grammar(VISIBLE)


@pytest.mark.parametrize("text", [
    "[GetToday()]",
    "[AddAgenda(token='a1', content='Meet Bob', time='2023-03-31 10:00:00', location='Room 2')]",
    "[AddAgenda(content='x',location='y')]",
    "[ToolSearcher(keywords='add agenda')]",
    r"[AddAgenda(content='it\'s \"fine\" \\ ok\n')]",
    "[AddAgenda(content='ü € 😀 [x] (y) a=b, c')]",
    "[AddAgenda(token=0, content=-12.5, time=True, location=['a', 'b'])]",
    "[AddAgenda(location=[])]",
])
def test_accepts_good_calls_and_they_parse(text):
    assert matches(GRAMMAR, text)
    name, params = parse_call(text)
    assert name in {"AddAgenda", "GetToday", "ToolSearcher", "QueryHistoryToday"}


@pytest.mark.parametrize("text", [
    "[DeleteAgenda(token='a')]",  # API not visible
    "[AddAgenda(date='x')]",  # not a parameter of AddAgenda
    "[GetToday(token='a')]",  # GetToday takes nothing
    "[AddAgenda(token='a', token='b')]",  # repeated keyword
    "[AddAgenda(time='b', token='a')]",  # out of spec order
    "[AddAgenda(token=\"a\")]",  # double quotes
    "[AddAgenda(token='a'b')]",  # unescaped quote
    "[AddAgenda(token='a\nb')]",  # raw newline
    r"[AddAgenda(token='\x41')]",  # escape outside the safe set
    "[AddAgenda(token=007)]",  # leading zeros: a Python SyntaxError
    "[AddAgenda(token=tok)]",  # bare name
    "[AddAgenda(token={'a': 1})]",
    "[AddAgenda(token='a',)]",
    "AddAgenda(token='a')",
    " [GetToday()]",
    "[GetToday()] and more",
    "[GetToday()][GetToday()]",
    "",
])
def test_rejects_everything_else(text):
    assert not matches(GRAMMAR, text)


@pytest.mark.parametrize("api_set", [LEVEL12, LEVEL3])
def test_random_derivations_parse_as_allowed_calls(api_set):
    rng = random.Random(1234)
    every = list(specs(api_set).values())
    for _ in range(30):
        visible = rng.sample(every, rng.randint(1, 5))
        grammar = call_grammar(visible)
        allowed = {s["name"]: list(s["input_parameters"]) for s in visible}
        for _ in range(20):
            text = sample(grammar, rng)
            assert matches(grammar, text), text
            name, params = parse_call(text)
            assert name in allowed
            assert list(params) == [p for p in allowed[name] if p in params]  # spec order, no repeats


def test_accepts_parameter_names_as_a_list_and_skips_bad_names():
    grammar = call_grammar([{"name": "Foo", "input_parameters": ["a", "not valid"]}, {"name": "Foo", "input_parameters": []}])
    assert matches(grammar, "[Foo(a='1')]")
    assert not matches(grammar, "[Foo(not valid='1')]")
    with pytest.raises(ValueError):
        call_grammar([])


def test_extra_body_per_server_kind():
    assert grammar_extra_body("G", "llama.cpp") == {"grammar": "G"}
    assert grammar_extra_body("G", "vllm") == {"guided_grammar": "G"}
    assert grammar_extra_body("G", "vllm-structured") == {"structured_outputs": {"grammar": "G"}}
    assert grammar_extra_body("G", "none") == {}
    assert call_extra_body(VISIBLE) == {"grammar": GRAMMAR}
    assert call_extra_body(VISIBLE, "none") == {}
    with pytest.raises(ValueError):
        grammar_extra_body("G", "tgi")
