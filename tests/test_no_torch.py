"""The data check and gold replay run without torch.

The 100 eval tasks' gold answers include ToolSearcher calls, but their keywords are
recorded ones, so no embedding (hence no torch) is needed to score them.
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
