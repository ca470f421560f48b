"""The scoring seam: stages are one enum, and the `score` stage goes to the scorer registered for the API."""

import json

from apibank_bench.data.manifests import manifest_ids
from apibank_bench.data.tasks import get_task
from apibank_bench.scoring.api_scorers import API_SCORERS, GENERIC, execute_and_compare, scorer_for
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Stage
from apibank_bench.scoring.toolsearcher_scorers import chosen_scorer, score_toolsearcher_call


def test_stages_are_written_as_their_plain_names():
    assert [str(stage) for stage in Stage] == ["parse", "api_name", "score", "error"]
    assert json.dumps({Stage.ERROR: Stage.API_NAME}) == '{"error": "api_name"}'
    assert Stage("score") is Stage.SCORE


def test_each_api_goes_to_its_registered_scorer_else_the_generic_one():
    assert scorer_for("ToolSearcher") is score_toolsearcher_call
    assert scorer_for("AddAgenda") is execute_and_compare is API_SCORERS.get(GENERIC).score


def test_the_scorer_reports_each_stage(apibank_root):
    scorer = Scorer(apibank_root)
    tasks = [get_task(task_id, root=apibank_root) for task_id in manifest_ids("all")]
    plain = next(task for task in tasks if task.gold.api_name != "ToolSearcher")
    search = next(task for task in tasks if task.gold.api_name == "ToolSearcher")
    unparsed = scorer.score(plain, "no call here")
    assert (unparsed.stage, unparsed.correct, unparsed.predicted_call) == (Stage.PARSE, False, None)
    assert unparsed.error.startswith("ParseError")
    misnamed = scorer.score(plain, "[NotAnApi(x=1)]")
    assert (misnamed.stage, misnamed.correct) == (Stage.API_NAME, False)
    assert misnamed.predicted_call == "[NotAnApi(x=1)]" and "NotAnApi != " in misnamed.error
    for task in (plain, search):
        score = scorer.score(task, task.gold_call)
        assert (score.stage, score.correct, score.api_name) == (Stage.SCORE, True, task.gold.api_name)
        assert score.predicted_call is not None and score.predicted_call.startswith(f"[{task.gold.api_name}(")
    keyword = Scorer(apibank_root, "keyword")  # no embedding needed
    wrong = keyword.score(search, "[ToolSearcher(keywords='nothing like the gold')]")
    assert (wrong.stage, wrong.correct) == (Stage.SCORE, False) and "keyword mismatch" in wrong.error


def test_a_results_line_holds_the_stage_as_a_plain_str(apibank_root):
    from apibank_bench.runs.results import records

    task = get_task(manifest_ids("all")[0], root=apibank_root)
    _, row = records(task, "no call", Scorer(apibank_root).score(task, "no call"))
    assert row.stage is Stage.PARSE  # a Stage in Python
    result = row.to_json()
    assert type(result["stage"]) is str and result["stage"] == "parse"  # xdist's channel serializes no enum


def test_an_api_scorer_that_raises_fails_the_answer_at_the_score_stage(apibank_root, monkeypatch):
    from apibank_bench.scoring import scorer as scorer_module

    def broken(task, arguments, scorer):
        raise RuntimeError("the API failed on this answer")

    task = next(get_task(i, root=apibank_root) for i in manifest_ids("all")
                if get_task(i, root=apibank_root).gold.api_name != "ToolSearcher")
    monkeypatch.setattr(scorer_module, "scorer_for", lambda name: broken)
    score = Scorer(apibank_root).score(task, task.gold_call)
    assert (score.stage, score.correct) == (Stage.SCORE, False)
    assert score.error == "RuntimeError: the API failed on this answer" and score.api_name == task.gold.api_name


def test_a_score_is_a_frozen_value():
    import dataclasses

    import pytest

    from apibank_bench.scoring.scorer import Score

    with pytest.raises(dataclasses.FrozenInstanceError):
        Score(True, Stage.SCORE, None).correct = False


def test_the_toolsearcher_scorer_of_a_task_and_what_preload_loads(apibank_root):
    tasks = [get_task(task_id, root=apibank_root) for task_id in manifest_ids("all")]
    level1 = next(task for task in tasks if task.level == "1")
    level2 = next(task for task in tasks if task.level == "2")
    default = Scorer(apibank_root)
    assert (chosen_scorer(level1, default), chosen_scorer(level2, default)) == ("keyword", "official")
    keyword = Scorer(apibank_root, " Keyword ")
    assert chosen_scorer(level2, keyword) == "keyword"  # the user's choice wins over the level's
    assert keyword.preload(tasks) is None  # keywords are compared, nothing is embedded
    assert default.preload([task for task in tasks if task.gold.api_name != "ToolSearcher"]) is None
    searched = [task for task in tasks if task.gold.api_name == "ToolSearcher" and task.level != "1"]
    preload = default.preload(searched)
    assert preload is not None
    preload.stop()  # what the session's end does
