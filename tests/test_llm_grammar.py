"""The call grammar: what it accepts parses as one allowed call; what it rejects."""

from __future__ import annotations

import random

import pytest

from apibank_bench.llm import call_extra_body, call_grammar, grammar_extra_body
from apibank_bench.llm.grammar import MAX_ITEMS, MAX_STRING
from apibank_bench.data.specs import LEVEL3, LEVEL12, specs
from gbnf_check import matches, parse_call, sample


L12 = specs(LEVEL12)
VISIBLE = [L12["AddAgenda"], L12["GetToday"], L12["ToolSearcher"], L12["BookHotel"],
           L12["TimedSwitch"], L12["AddMeeting"], L12["RecordHealthData"]]
GRAMMAR = call_grammar(VISIBLE)
UNTYPED = call_grammar(VISIBLE, typed=False)


@pytest.mark.parametrize("text", [
    "[GetToday()]",
    "[AddAgenda(token='a1', content='Meet Bob', time='2023-03-31 10:00:00', location='Room 2')]",
    "[AddAgenda(content='x',location='y')]",
    "[ToolSearcher(keywords='add agenda')]",
    r"[AddAgenda(content='it\'s \"fine\" \\ ok\n')]",
    "[AddAgenda(content='~ [x] (y) a=b, c; {z} $5 #1 @u %p ^&*|<>?!`')]",
    "[AddAgenda(content='" + "x" * MAX_STRING + "')]",
    "[AddMeeting(attendees=[" + ", ".join(["'a'"] * MAX_ITEMS) + "])]",
    "[BookHotel(room_count=123456789012.123456)]",
    "[BookHotel(room_count=2, adult_count='3', child_count=0)]",
    "[TimedSwitch(name='light', time='2023-03-01 10:00:00', on=True)]",
    "[TimedSwitch(on='False')]",
    "[AddMeeting(attendees=['a', 'b'])]",
    "[AddMeeting(attendees=[])]",
    "[AddMeeting(attendees='[\"a\"]')]",
    "[RecordHealthData(user_id='1', health_data=[{'name': 'blood_pressure', 'value': '120/80'}, {'name': 'heart_rate', 'value': 80}])]",
])
def test_accepts_good_calls_and_they_parse(text):
    assert matches(GRAMMAR, text) and matches(UNTYPED, text)
    name, params = parse_call(text)
    assert name in {s["name"] for s in VISIBLE}


@pytest.mark.parametrize("text", [
    "[AddAgenda(token=0)]",  # str parameter: strings only
    "[AddAgenda(content=['a'])]",
    "[AddAgenda(time=True)]",
    "[BookHotel(room_count=[1])]",
    "[TimedSwitch(on=1)]",
    "[AddMeeting(attendees=3)]",
])
def test_typed_values(text):
    assert not matches(GRAMMAR, text)
    assert matches(UNTYPED, text)
    parse_call(text)


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
    "[BookHotel(room_count=007)]",  # leading zeros: a Python SyntaxError
    "[AddAgenda(token=tok)]",  # bare name
    "[AddMeeting(attendees=[['a']])]",  # nested lists
    "[RecordHealthData(health_data=[{'a': {'b': 1}}])]",  # nested dicts
    "[AddAgenda(token='a',)]",
    "[AddAgenda(content='" + "x" * (MAX_STRING + 1) + "')]",  # bounded: a runaway string ends
    "[AddMeeting(attendees=[" + ", ".join(["'a'"] * (MAX_ITEMS + 1)) + "])]",  # bounded: a runaway list ends
    "[RecordHealthData(health_data=[{" + ", ".join(["'a': 1"] * (MAX_ITEMS + 1)) + "}])]",
    "[BookHotel(room_count=1234567890123)]",  # 13 integer digits
    "[AddAgenda(content='ü')]",  # printable ASCII only, as every gold value
    "[AddAgenda(content='a\tb')]",  # a raw tab: control characters only as escapes
    "AddAgenda(token='a')",
    " [GetToday()]",
    "[GetToday()] and more",
    "[GetToday()][GetToday()]",
    "",
])
def test_rejects_everything_else(text):
    assert not matches(GRAMMAR, text)
    assert not matches(UNTYPED, text)


TYPES = {"str": str, "int": (int, float, str), "float": (int, float, str), "bool": (bool, str),
         "list": (list, str), "list(str)": (list, str)}


@pytest.mark.parametrize("api_set", [LEVEL12, LEVEL3])
def test_random_derivations_parse_as_allowed_calls(api_set):
    rng = random.Random(1234)
    every = list(specs(api_set).values())
    for n in range(30):
        visible = rng.sample(every, rng.randint(1, 5))
        grammar = call_grammar(visible, typed=n % 2 == 0)
        allowed = {s["name"]: list(s["input_parameters"]) for s in visible}
        for _ in range(20):
            text = sample(grammar, rng)
            assert matches(grammar, text), text
            name, params = parse_call(text)
            assert name in allowed
            assert list(params) == [p for p in allowed[name] if p in params]  # spec order, no repeats
            if n % 2 == 0:
                declared = {s["name"]: s["input_parameters"] for s in visible}[name]
                for key, value in params.items():
                    kind = declared[key]["type"]
                    assert isinstance(value, TYPES.get(kind, object)), (kind, value)


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


def _literal(value) -> str:
    """A value as the grammar writes it: single-quoted strings, Python's numbers and booleans."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t")
        return f"'{escaped}'"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def test_every_instance_grammar_admits_its_gold_call(apibank_root):
    """The bounds lose no gold answer: over all 753 instances, each gold call (its parameters in spec
    order) is admitted by the grammar of that instance's visible APIs, unless the gold itself names an
    API the instance does not show or a parameter its spec lacks (which no grammar of ours admits)."""
    from apibank_bench.agents.prompts import visible_schemas
    from apibank_bench.data.tasks import load_level

    checked = 0
    for task in (task for level in "123" for task in load_level(level, apibank_root)):
        schemas = visible_schemas(task)
        spec = next((s for s in schemas if s["name"] == task.gold.api_name), None)
        order = list(spec["input_parameters"]) if spec else []
        if spec is None or not set(task.gold.params) <= set(order):
            continue
        args = ", ".join(f"{key}={_literal(task.gold.params[key])}" for key in order if key in task.gold.params)
        text = f"[{task.gold.api_name}({args})]"
        assert matches(call_grammar(schemas), text), (task.combined_id, text)
        checked += 1
    assert checked > 700
