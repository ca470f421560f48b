"""What runs without torch.

The data check and gold replay never embed: the 100 eval tasks' gold answers include
ToolSearcher calls, but their keywords are recorded ones. A search that does embed a str
uses the numpy engine, so it needs no torch either; only keywords that are not a str go
to sentence-transformers (and so need torch).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def test_summary_of_the_eval_tasks_does_not_import_torch(apibank_root):
    command = [sys.executable, "-X", "importtime", "-m", "apibank_bench",
               "summary", "--level", "all", "--limit", "100", "--json"]
    env = {**os.environ, "APIBANK_ROOT": str(apibank_root)}
    done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    # -X importtime writes one line per imported module to stderr: "import time: self | cumulative | name".
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "apibank_bench.scoring" in imported  # the trace did record the run's imports
    heavy = [name for name in imported if re.match(r"(torch|sentence_transformers)(\.|$)", name)]
    assert not heavy, f"the summary imported {heavy[:5]}"

    report = json.loads(done.stdout)
    assert report["num_samples"] == 100
    assert report["gold_replay_correct"] == 100, report["gold_replay_failures"]
    assert report["level_counts"] == {"1": 33, "2": 33, "3": 34}


def test_searching_text_needs_no_torch(apibank_root):
    """With torch, sentence-transformers and transformers unimportable, text is searched (our API and
    the official scorer, on keywords never recorded); a list needs them and says what to install."""
    code = (
        "import sys\n"
        "for name in ('torch', 'sentence_transformers', 'transformers'):\n"
        "    sys.modules[name] = None  # importing it fails\n"
        "from apibank_bench.apis.level12.tool_searcher import ToolSearcher\n"
        "from apibank_bench.apis.search.model import ModelUnavailable\n"
        "from apibank_bench.data.tasks import load_level\n"
        "from apibank_bench.scoring.toolsearcher_scorers import score_toolsearcher\n"
        "tool = ToolSearcher()\n"
        "result = tool.call('delete alarm')\n"
        "assert [item['name'] for item in result['output']] == ['GetUserToken', 'DeleteAlarm'], result\n"
        "task = next(t for t in load_level('2', sys.argv[1]) if t.gold.params.get('keywords') == 'set alarm')\n"
        "correct, error, _ = score_toolsearcher(task, {'keywords': 'please set an alarm for 7 am'}, 'official', sys.argv[1])\n"
        "assert correct, error\n"
        "try:\n"
        "    tool.call(['delete alarm'])\n"
        "except ModelUnavailable as exc:\n"
        "    assert 'pip install sentence-transformers' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('a list needs sentence-transformers')\n"
        "assert not any(name in sys.modules and sys.modules[name] for name in ('torch', 'sentence_transformers'))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(apibank_root)], check=True, cwd=PROJECT)
