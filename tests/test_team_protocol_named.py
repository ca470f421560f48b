"""`--team-protocol replicas` is named wherever a run's setup is shown: the closing table, the report's
setup column, the instance pages and `show` (they read like the topology's own graph before)."""

from __future__ import annotations

import subprocess
import sys
from html import escape

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.reports.html import build_report
from openai_stub import OpenAIStub
from helpers import EVAL_IDS, mixed, run_command

NAMED = "replicas protocol: 2 lone answers of its final role, voted (not the topology's graph)"


def test_protocol_words_name_replicas_and_nothing_else():
    from apibank_bench.runs.team import protocol_words

    team = {"topology": "decentralized", "team_size": 2, "model": "m"}
    assert protocol_words({**team, "team_protocol": "replicas"}) == NAMED
    assert protocol_words({**team, "team_protocol": "topology"}) is None
    assert protocol_words({**team, "topology": "single", "team_protocol": "replicas"}) is None  # no team to play


def test_a_replicas_run_is_named_in_the_closing_table_report_instance_pages_and_show(tmp_path):
    out = tmp_path / "run"
    with OpenAIStub(default=mixed) as stub:
        run = run_command(out, "--model", "stub", "--base-url", stub.url, "--topology", "decentralized",
                          "--team-size", "2", "--team-protocol", "replicas", "--limit", "2", "--no-cache")
    assert run.returncode in (0, 1), run.stderr[-2000:]
    banner = next(line for line in run.stdout.splitlines() if " API-Bank: " in line)
    assert f"decentralized ({NAMED}) / stub" in banner

    index = build_report([out], tmp_path / "report")
    assert escape(f"decentralized / {NAMED} / stub / team of 2") in index.read_text()
    pages = list((tmp_path / "report" / "instances").rglob("*.html"))
    assert len(pages) == 2 and all(escape(NAMED) in page.read_text() for page in pages)

    show = subprocess.run([sys.executable, "-m", "apibank_bench", "show", EVAL_IDS[0], "--out-dir", str(out)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert show.returncode == 0, show.stderr
    assert NAMED in show.stdout.split("== dialogue")[0]  # in the head, above the turns


def test_the_report_setup_column_shows_the_epochs(tmp_path):
    out = tmp_path / "run"
    assert run_command(out, "--model", "gold", "--limit", "2", "--epochs", "3").returncode == 0
    page = build_report([out], tmp_path / "report").read_text()
    assert "gold calls (harness self-check) / 3 epochs" in page
