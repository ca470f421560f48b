import dataclasses
from collections import Counter

import pytest

from apibank_bench.data import manifests
from apibank_bench.core.frozen import thaw
from apibank_bench.data.tasks import get_task, load_level, split_combined_id


def test_task_counts_per_level(apibank_root):
    assert [len(load_level(level, apibank_root)) for level in "123"] == [389, 119, 245]


def test_ids_follow_the_reference_scheme(apibank_root):
    level1 = load_level("1", apibank_root)
    assert level1[0].id == "AddAgenda-AddAlarm-GetUserToken-level-2-1.jsonl::0"
    assert all(int(task.id.rsplit("::", 1)[1]) % 2 == 0 for task in level1)
    assert load_level("3", apibank_root)[1].id == "level-3.json::0::1"
    assert len({task.combined_id for level in "123" for task in load_level(level, apibank_root)}) == 753


def test_task_holds_history_before_the_call(apibank_root):
    task = get_task("level-2::AddAgenda-level-3-1.jsonl::2", root=apibank_root)
    assert task.gold.api_name == "GetUserToken"
    assert [turn.api_name for turn in task.prior_api_turns] == ["ToolSearcher"]
    assert len(task.history) == 6
    assert [row["api_name"] for row in task.history if row["role"] == "API"] == ["ToolSearcher"]
    assert all(row["role"] in {"User", "AI", "API"} for row in task.history)
    assert task.api_names == ("AddAgenda", "GetUserToken", "ToolSearcher")
    assert task.gold_call == "[GetUserToken(username='newuser', password='newpass')]"


def test_level3_history_starts_with_the_requirement(apibank_root):
    task = get_task("level-3::level-3.json::0::1", root=apibank_root)
    assert task.history[0] == {"role": "User", "text": "Query meeting of John and send email reminder to john@example.com."}
    assert [row["api_name"] for row in task.history[1:]] == ["ToolSearcher"]
    assert task.gold.api_name == "QueryMeeting"


def test_tasks_are_immutable(apibank_root):
    task = load_level("1", apibank_root)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.level = "2"
    with pytest.raises(TypeError):
        task.gold.result["output"] = "changed"
    with pytest.raises(TypeError):
        task.history[0]["text"] = "changed"
    copy = thaw(task.gold.result)
    copy["output"] = "changed"
    assert task.gold.result["output"] != "changed"


def test_eval_manifest_loads_100_tasks_balanced(apibank_root):
    tasks = manifests.load_selection("all", root=apibank_root)
    assert len(tasks) == 100
    assert Counter(task.level for task in tasks) == {"1": 33, "2": 33, "3": 34}
    assert [task.combined_id for task in tasks] == manifests.manifest_ids("all")


@pytest.mark.parametrize("task_id", ["level-9::x", "nope.jsonl::0", "level-1::AddAgenda-level-1-1.jsonl::1"])
def test_unknown_ids_raise_key_error(apibank_root, task_id):
    with pytest.raises(KeyError):
        get_task(task_id, root=apibank_root)


def test_split_combined_id():
    assert split_combined_id("level-2::a.jsonl::4") == ("2", "a.jsonl::4")
    assert split_combined_id("level-3.json::1::2") == ("3", "level-3.json::1::2")
    assert split_combined_id("a.jsonl::0") == ("", "a.jsonl::0")


def test_selection_options():
    everything = manifests.select("all")
    assert manifests.select("all", limit=5, offset=2) == everything[2:7]
    assert manifests.select("all", only=[everything[3]]) == [everything[3]]
    source_id = split_combined_id(everything[4])[1]
    assert manifests.select("all", only=[source_id]) == [everything[4]]
    with pytest.raises(ValueError):
        manifests.select("all", only=["level-1::missing.jsonl::0"])
