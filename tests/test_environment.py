"""The scoring environment's start-up: a database is read when a tool first needs it, every tool gets a
copy of its own, and Levels 1-2 never import Level 3's API modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apibank_bench.apis.environment import Environment, initial_databases
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.data.manifests import load_selection
from apibank_bench.scoring.scorer import Scorer


@pytest.fixture
def root_with_a_broken_database(tmp_path, apibank_root):
    """The data root, except that ImageCaptioning.json (which no AddAgenda task uses) is not JSON."""
    root = tmp_path / "api-bank"
    root.mkdir()
    for entry in apibank_root.iterdir():
        if entry.name != "init_database":
            (root / entry.name).symlink_to(entry)
    (root / "init_database").mkdir()
    for path in (apibank_root / "init_database").glob("*.json"):
        target = root / "init_database" / path.name
        if path.name == "ImageCaptioning.json":
            target.write_text("not JSON", encoding="utf-8")
        else:
            target.symlink_to(path)
    return root


def test_a_database_is_read_only_when_a_tool_needs_it(root_with_a_broken_database):
    root = root_with_a_broken_database
    tasks = [task for task in load_selection("1", root=root) if task.gold.api_name == "AddAgenda"]
    assert tasks
    scorer = Scorer(root)
    assert all(scorer.gold_replay(task).correct for task in tasks)
    environment = Environment.for_level("1", root)
    assert "ImageCaptioning" in initial_databases(root)  # listed without being read
    with pytest.raises(json.JSONDecodeError):
        environment.tool("ImageCaption")


def test_every_tool_gets_its_own_copy_equal_to_the_file(apibank_root):
    recorded = json.loads((apibank_root / "init_database" / "Agenda.json").read_text(encoding="utf-8"))
    first, second = Environment.for_level("1", apibank_root), Environment.for_level("1", apibank_root)
    copy = first.tool("AddAgenda").database
    assert copy == recorded and list(copy) == list(recorded)  # same values, same order
    copy.clear()
    assert second.tool("AddAgenda").database == recorded
    assert first.tool("QueryAgenda").database == recorded  # another tool of the same database
    assert initial_databases(apibank_root)["Agenda"] == recorded


def test_levels_1_and_2_import_no_level_3_api_module():
    code = ("import sys\nfrom apibank_bench.apis import api_classes\n"
            "classes = api_classes('apis')\n"
            "print(len(classes), sorted(m for m in sys.modules if m.startswith('apibank_bench.apis.level3')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          check=True)
    count, level3 = done.stdout.split(" ", 1)
    assert int(count) > 40
    assert level3.strip() == "[]"
