"""Every run ends with its documented exit code (issue 38): short runs, whose end can come while background
work (the scorer's preload of the embedding model, on a cold cache) is still under way, must not abort
at the interpreter's end (134, `FATAL: exception not rethrown` or `terminate called without an active
exception`) after printing a correct closing table. Before the preload was joined, this test failed at the
13th run here (SIGABRT after the closing table)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from apibank_bench.core.exit_codes import ExitCode
from apibank_bench.core.paths import PROJECT_ROOT
from openai_stub import OpenAIStub, Reply

RUNS = 30
#: Short runs of the kinds that ended with 134: teams and Level-2/3 singles, each of one or two instances.
KINDS = (("--topology", "centralized", "--team-size", "4", "--level", "2", "--limit", "2"),
         ("--level", "2", "--limit", "1"),
         ("--level", "3", "--limit", "1"),
         ("--topology", "decentralized", "--team-size", "2", "--rounds", "1", "--level", "3", "--limit", "1"))


def short_run(folder: Path, url: str, kind: tuple[str, ...], *extra: str) -> subprocess.CompletedProcess:
    """`apibank-bench run` into `folder` with a cache of its own (cold: the embedding model is built anew)."""
    command = [sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", url, "--no-cache",
               "--cache-dir", str(folder / "cache"), "--out-dir", str(folder / "out"), *kind, *extra]
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)


def test_thirty_short_runs_end_with_their_documented_exit_codes(tmp_path):
    # A wrong answer is a result (0); an endpoint that fails every request, not retried, gives error rows (1).
    with OpenAIStub(default=Reply(text="[GetToday()]", delay=0.05)) as answers, \
            OpenAIStub(default=Reply(status=500, delay=0.05)) as failing:
        plan = [(tmp_path / f"run{index}", KINDS[index % len(KINDS)], index % 5 == 4) for index in range(RUNS)]

        def run(folder: Path, kind: tuple[str, ...], fails: bool) -> tuple[int, int, str]:
            if fails:
                done = short_run(folder, failing.url, kind, "--max-retries", "0", "--down-after", "0")
                return done.returncode, ExitCode.INCOMPLETE, done.stdout + done.stderr
            done = short_run(folder, answers.url, kind)
            return done.returncode, ExitCode.OK, done.stdout + done.stderr

        with ThreadPoolExecutor(2) as pool:  # two at a time: the machine's two cores
            ended = list(pool.map(lambda step: run(*step), plan))
    for (folder, kind, _), (code, expected, output) in zip(plan, ended):
        assert not any(word in output for word in ("FATAL", "Aborted", "terminate called")), \
            f"{folder.name} {kind}: {output[-3000:]}"
        assert code == expected, f"{folder.name} {kind}: exit {code}, not {int(expected)}: {output[-3000:]}"
        assert "API-Bank:" in output and (folder / "out" / "summary.json").is_file()  # the closing table, the summary
