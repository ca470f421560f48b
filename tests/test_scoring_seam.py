"""The scoring seam: stages are one enum, and the `score` stage goes to the scorer registered for the API."""

import json

from apibank_bench.data.manifests import manifest_ids
from apibank_bench.data.tasks import get_task
from apibank_bench.scoring.api_scorers import API_SCORERS, GENERIC, execute_and_compare, scorer_for
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.scoring.stage import Stage
from apibank_bench.scoring.toolsearcher_scorers import score_toolsearcher_call


def test_stages_are_written_as_their_plain_names():
    assert [str(stage) for stage in Stage] == ["parse", "api_name", "score", "error"]
    assert json.dumps({Stage.ERROR: Stage.API_NAME}) == '{"error": "api_name"}'
    assert Stage("score") is Stage.SCORE


def test_each_api_goes_to_its_registered_scorer_else_the_generic_one():
    assert scorer_for("ToolSearcher") is score_toolsearcher_call
    assert scorer_for("AddAgenda") is execute_and_compare is API_SCORERS.get(GENERIC)


def test_the_scorer_reports_each_stage(apibank_root):
    scorer = Scorer(apibank_root)
    tasks = [get_task(task_id, root=apibank_root) for task_id in manifest_ids("all")]
    plain = next(task for task in tasks if task.gold.api_name != "ToolSearcher")
    search = next(task for task in tasks if task.gold.api_name == "ToolSearcher")
    assert scorer.score(plain, "no call here").stage is Stage.PARSE
    assert scorer.score(plain, "[NotAnApi(x=1)]").stage is Stage.API_NAME
    for task in (plain, search):
        score = scorer.score(task, task.gold_call)
        assert (score.stage, score.correct) == (Stage.SCORE, True)
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
