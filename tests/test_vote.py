"""The team vote (agents/vote.py): the reference harness's counting, and the normalized option.

The reference counts each agent's answer by what its scorer would read: a parsed
call by its name and exact arguments, anything else by its text lower-cased and
trimmed; an empty answer does not vote; ties go to the key held earliest.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apibank_bench.agents.topologies import build_topology
from apibank_bench.agents.vote import canonical_call, reference_key, vote
from apibank_bench.core.settings import RunConfig
from apibank_bench.llm import ChatClient, ModelConfig
from apibank_bench.scoring.parsing import parse_call
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.data.tasks import get_task
from tests.openai_stub import Reply

A = "[AddAlarm(token='t', time='2023-09-12 13:50:00')]"
B = "[AddAgenda(token='t', content='Meeting', time='2023-09-12 14:00:00', location='office')]"


def winner(answers, rule="reference"):
    return vote(answers, rule).winner


# -- which calls count as one ---------------------------------------------------------

def test_a_call_is_its_name_and_exact_arguments_whatever_their_order_or_spelling():
    same = ["[F(a=1, b='x')]", '[F(b="x", a=1)]', "Sure: [F( a = 1 ,b='x' )]\n"]
    assert len({reference_key(answer) for answer in same}) == 1
    assert reference_key("[G(a=1, b='x')]") != reference_key(same[0])  # the name counts
    assert reference_key("[F(a=1)]") != reference_key(same[0])  # so does every argument


@pytest.mark.parametrize("left,right", [
    ("[F(a='1')]", "[F(a=1)]"),
    ("[F(a=1)]", "[F(a=1.0)]"),
    ("[F(a=1)]", "[F(a=True)]"),
    ("[F(a=None)]", "[F(a='None')]"),
    ("[F(a=[1])]", "[F(a=['1'])]"),
])
def test_values_of_different_types_are_different_calls(left, right):
    assert reference_key(left) != reference_key(right)
    assert winner([left, right, right]) == 1


@pytest.mark.parametrize("left,right,merged_when_normalized", [
    ("[F(token='  m9n8 ')]", "[F(token='m9n8')]", True),  # the normalized rule trims string values
    ("[F(k='agenda  meeting')]", "[F(k='agenda meeting')]", False),
    ("[F(k='Agenda')]", "[F(k='agenda')]", False),
])
def test_respelled_strings_are_different_calls_unless_normalized(left, right, merged_when_normalized):
    assert reference_key(left) != reference_key(right)
    assert winner([left, right, right]) == 1
    assert (canonical_call(left) == canonical_call(right)) == merged_when_normalized
    assert winner([left, right, right], "normalized") == (0 if merged_when_normalized else 1)


def test_the_reference_equates_what_its_json_key_equates():
    # Its key is sorted-key JSON of the parsed arguments: a tuple reads as a list.
    assert reference_key("[F(a=(1, 2))]") == reference_key("[F(a=[1, 2])]")


def test_a_call_that_does_not_parse_votes_with_its_own_text_lower_cased():
    positional = "[OrganizationMembers('Alibaba')]"
    assert reference_key(f"I would call {positional} here. ") == positional.lower()
    assert reference_key(positional.upper()) == positional.lower()
    assert reference_key("[OrganizationMembers( 'Alibaba')]") != positional.lower()  # text, not a parse
    assert winner([A, positional, "[ORGANIZATIONMEMBERS('ALIBABA')]"]) == 1
    # Under the normalized rule only parsed calls vote while any parses.
    assert winner([A, positional, positional], "normalized") == 0


def test_the_key_is_read_from_the_call_the_scorer_reads():
    draft_then_final = f"Draft: {B}\nFinal: {A}"
    assert reference_key(draft_then_final) == reference_key(A)
    result = vote([B, draft_then_final, A])
    assert result.winner == 1 and result.tally[1][1] == 2


def test_prose_without_a_call_votes_with_its_whole_text_and_empty_answers_do_not_vote():
    # The reference reads the whole answer when it holds no bracketed call, so prose votes too.
    assert reference_key("  I am NOT sure. ") == "i am not sure."
    assert winner(["I am unsure", "i am unsure ", A]) == 0
    assert reference_key("") is None and reference_key("  \n ") is None and reference_key(None) is None
    result = vote(["", A, "   ", B, B])
    assert result.keys[0] is None and result.keys[2] is None and result.winner == 3
    assert [count for _, count in result.tally] == [1, 2]


def test_nobody_voting_means_no_answer():
    for rule in ("reference", "normalized"):
        result = vote(["", None, "  "], rule)
        assert result.winner is None and result.tally == [] and result.keys == [None, None, None]
    assert vote([]).winner is None


@pytest.mark.parametrize("answers,expected", [
    ([B, A, A, B], 0),
    ([A, B, B, A], 0),
    (["", A, B, B, A], 1),  # the earliest holder of a tied key, not the earliest agent
    ([B, A, A, "[x(1)]", "[X(1)]"], 1),  # three keys, two tied at 2: A's first holder is earlier
    ([A, B, B], 1),  # a majority beats an earlier single vote
])
def test_the_most_votes_win_and_ties_go_to_the_earliest_holder(answers, expected):
    assert winner(answers) == expected


def test_the_tally_is_in_first_seen_order_and_serializable():
    result = vote([B, A, "", A, "[F('x')]"])
    assert [count for _, count in result.tally] == [1, 2, 1]
    assert result.keys[1] == result.keys[3] == result.tally[1][0]
    assert result.keys[4] == "[f('x')]"
    data = json.loads(json.dumps(result.to_dict()))
    assert data == {"rule": "reference", "keys": result.keys, "winner": 1,
                    "tally": [[key, count] for key, count in result.tally]}
    assert json.loads(result.keys[1]) == {"name": "AddAlarm", "params": {"time": "2023-09-12 13:50:00", "token": "t"}}


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown vote rule"):
        vote([A], "plurality")


# -- invariance to spelling outside argument values -----------------------------------

SAFE_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " -_:./@,=", max_size=10)
SCALARS = st.one_of(SAFE_TEXT, st.integers(-10**6, 10**6), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
CALLS = st.tuples(st.sampled_from(["AddAlarm", "ToolSearcher", "GetToday"]),
                  st.dictionaries(st.sampled_from(["token", "time", "keywords", "n", "items"]), VALUES, max_size=3))
SPACE = st.sampled_from(["", " ", "  ", "\n"])


@st.composite
def spelled(draw, call) -> str:
    """One spelling of `call`: any quote style and spacing outside its values, any order of arguments."""
    name, arguments = call

    def value(item) -> str:
        if isinstance(item, str):
            quote = draw(st.sampled_from(["'", '"']))
            return f"{quote}{item}{quote}"
        if isinstance(item, list):
            return "[" + f",{draw(SPACE)}".join(value(element) for element in item) + "]"
        return repr(item)

    keys = draw(st.permutations(sorted(arguments)))
    args = f"{draw(SPACE)},{draw(SPACE)}".join(f"{key}{draw(SPACE)}={draw(SPACE)}{value(arguments[key])}"
                                               for key in keys)
    prefix = draw(st.sampled_from(["", " ", "Answer: ", "I will call\n"]))
    return f"{prefix}[{name}({draw(SPACE)}{args}{draw(SPACE)})]{draw(SPACE)}"


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(CALLS, min_size=1, max_size=3), st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_the_vote_ignores_quote_style_and_spacing_outside_values(data, calls, picks):
    def answers() -> list[str]:  # pick 3 means an empty answer
        return ["" if pick >= len(calls) else data.draw(spelled(calls[pick])) for pick in picks]

    first, second = vote(answers()), vote(answers())
    assert first == second
    expected_voters = [pick < len(calls) for pick in picks]
    assert [key is not None for key in first.keys] == expected_voters


# -- end to end: agents on the scripted server, the team's answer through the scorer ---

ALARM = "level-1::AddAlarm-GetReminder-ModifyAgenda-GetUserToken-level-2-1.jsonl::2"
MEMBERS = "level-3::level-3.json::10::1"


@pytest.fixture(scope="module")
def scorer(apibank_root):
    return Scorer()


def team_answer(stub, answers, topology="independent", rule="reference", task_id=ALARM, rounds=1):
    """The team's submitted answer when agent i (seed i, + N per debate round) answers answers[i]."""
    stub.default = lambda body: Reply(answers[body["seed"] % len(answers)])
    model = ChatClient(ModelConfig(base_urls=[stub.url], model="stub-model", api_key="test", timeout=10,
                                   max_retries=0, cache_dir=None, constrained=False, max_in_flight=16))
    cfg = RunConfig(topology=topology, team_size=len(answers), rounds=rounds, vote=rule)
    return build_topology(cfg, model)(get_task(task_id))


def test_issue_example_a_respelled_token_does_not_merge_with_the_exact_calls(stub, scorer):
    exact = "[AddAlarm(token='m9n8b7v6c5x4z3a2s1', time='2023-03-25 08:30:00')]"
    spaced = "[AddAlarm(token='  m9n8b7v6c5x4z3a2s1 ', time='2023-03-25 08:30:00')]"
    task = get_task(ALARM)
    solution = team_answer(stub, [spaced, exact, exact, exact])
    assert solution.answer == exact and scorer.score(task, solution.answer).correct
    assert solution.trace["vote"]["winner"] == 1
    assert [count for _, count in solution.trace["vote"]["tally"]] == [1, 3]
    normalized = team_answer(stub, [spaced, exact, exact, exact], rule="normalized")
    assert normalized.answer == spaced and normalized.trace["vote"]["rule"] == "normalized"
    assert not scorer.score(task, normalized.answer).correct


def test_issue_example_positional_calls_vote_and_win_a_tie(stub, scorer):
    positional = "[OrganizationMembers('Alibaba')]"
    keyword = "[OrganizationMembers(organization='Alibaba Group')]"
    task = get_task(MEMBERS)
    solution = team_answer(stub, [f"Calling {positional}", keyword, positional, keyword], task_id=MEMBERS)
    assert solution.answer == positional
    assert scorer.score(task, solution.answer).stage == "parse"
    normalized = team_answer(stub, [positional, keyword, positional, keyword], task_id=MEMBERS, rule="normalized")
    assert normalized.answer == keyword
    assert scorer.score(task, normalized.answer).stage == "score"


def test_a_team_where_nobody_votes_has_no_answer(stub, scorer):
    solution = team_answer(stub, ["", "", "  ", ""])
    assert solution.answer is None and solution.trace["vote"]["winner"] is None
    assert solution.answered_by == "none"  # no path answered: the row says so
    assert scorer.score(get_task(ALARM), solution.answer).stage == "parse"


def test_the_debate_votes_over_its_last_round_by_the_same_rule(stub):
    # Every debater repeats its own answer each round; the last round decides.
    exact = "[AddAlarm(token='m9n8b7v6c5x4z3a2s1', time='2023-03-25 08:30:00')]"
    spaced = "[AddAlarm(token='m9n8b7v6c5x4z3a2s1 ', time='2023-03-25 08:30:00')]"
    solution = team_answer(stub, [spaced, exact, exact, spaced], topology="decentralized", rounds=2)
    assert solution.answer == spaced and solution.model_calls == 8
    assert [count for _, count in solution.trace["vote"]["tally"]] == [2, 2]
    keys = solution.trace["vote"]["keys"]
    assert keys[0] == keys[3] != keys[1] == keys[2]
    json.dumps(solution.to_trace())  # the whole trace is serializable, keys included


def test_each_answer_is_parsed_once_on_its_way_to_the_vote_the_row_and_the_agents_scores(stub, scorer, monkeypatch):
    from apibank_bench.runs.instances import Solved, score
    from apibank_bench.scoring import prediction

    parsed: list[str | None] = []

    def counting(text):
        parsed.append(text)
        return parse_call(text)

    monkeypatch.setattr(prediction, "parse_call", counting)
    exact = "[AddAlarm(token='m9n8b7v6c5x4z3a2s1', time='2023-03-25 08:30:00')]"
    answers = [f"I call {exact}", "[AddAlarm('positional')]", "no call at all", exact]
    solution = team_answer(stub, answers, topology="decentralized", rounds=2)
    assert len(parsed) == 8  # 4 debaters x 2 rounds: each answer parsed once, by its turn
    result = score(Solved(get_task(ALARM), solution, [], False, 0.0), scorer)
    assert len(parsed) == 8  # the vote, the team's score and each agent's score read those parses
    assert result.row.correct and len(result.row.agents_correct) == 8
    assert result.row.vote_margin == 2 - 1  # the two exact calls against each other key's one
