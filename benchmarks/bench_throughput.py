"""Throughput of a benchmark run against an endpoint with a fixed latency.

Starts a local OpenAI-compatible server that answers every completion after
`--latency` seconds (the scripted server of the test suite, on 127.0.0.1) with a
mix of calls, a third of them ToolSearcher calls with keywords never recorded (so
scoring them with the default scorers searches by embedding and loads the
embedding model), then times `apibank-bench run` on the eval instances for: the
gold self-check (no model: the harness's own cost), a single agent, and a
decentralized debate (N=4, R=2: two rounds in all, of four parallel requests). For
each it reports the wall time, the time above the gold self-check, the ideal
(latency x sequential model steps x waves of instances in flight), its CPU time, the
run's peak memory, and where a model run's time goes: its first request, its last
answer and its exit, in seconds from its start.

    python benchmarks/bench_throughput.py [--latency 0.5] [--limit 0] [--concurrency K] [-n N] [--repeats R]
"""

from __future__ import annotations

import argparse
import math
import zlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from openai_stub import OpenAIStub, Reply  # noqa: E402

#: (label, run flags, sequential model steps per instance, requests per step)
SHAPES = [
    ("gold self-check", ["--model", "gold"], 0, 0),
    ("single", ["--model", "stub", "--topology", "single"], 1, 1),
    ("decentralized N=4 R=2", ["--model", "stub", "--topology", "decentralized", "--team-size", "4",
                               "--rounds", "2"], 2, 4),
]

#: What the endpoint answers, picked by the request's text (so a rerun answers alike, whatever the order).
MIX = ("[ToolSearcher(keywords='a benchmark search never recorded')]", "[GetToday()]",
       "[AddAlarm(token='t', time='2023-03-25 08:30:00')]")


def mixed(body: dict) -> Reply:
    return Reply(text=MIX[zlib.crc32(body["messages"][-1]["content"].encode()) % len(MIX)])


def timed_run(argv: list[str]) -> tuple[float, float, float, float, int]:
    """Monotonic start, wall seconds, CPU seconds (user + system), peak RSS in MB (the run's own process
    tree's largest), exit code."""
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    return started, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per completion (default 0.5)")
    parser.add_argument("--limit", type=int, default=0, help="eval instances (0 = all 100)")
    parser.add_argument("--concurrency", type=int, default=None, help="instances in flight (default: the suite's)")
    parser.add_argument("-n", "--workers", default=None, help="xdist workers (default: none)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of the three runs, one after the other (more than 1: each round's rows, then "
                             "the medians)")
    args = parser.parse_args()

    from apibank_bench.core.settings import resolve
    from apibank_bench.llm.limit import request_ceiling
    from apibank_bench.runs.instances import instances_in_flight
    from apibank_bench.runs.setting_rules import hand_down

    hand_down()  # this script resolves settings itself: the layers' choices and rules first

    settings = resolve(lambda s: {"base_url": "http://x/v1", "model": "stub"}.get(s.name))
    in_flight = args.concurrency or instances_in_flight(settings, batches=True)  # the stand-in says it is vLLM
    ceiling = request_ceiling(settings.max_in_flight, batches=True)
    instances = args.limit or 100
    rounds: list[list[tuple]] = []
    loads = []
    with OpenAIStub(default=mixed, hold=args.latency, owned_by="vllm") as stub, \
            tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            loads.append(os.getloadavg()[0])
            rows: list[tuple] = []
            gold_wall = 0.0
            for label, flags, steps, width in SHAPES:
                argv = [sys.executable, "-m", "apibank_bench", "run", "--limit", str(args.limit), "--no-cache",
                        "--base-url", stub.url, "--out-dir", str(Path(tmp) / label.split()[0]), "--overwrite",
                        *flags]
                if args.concurrency:
                    argv += ["--concurrency", str(args.concurrency)]
                if args.workers:
                    argv += ["-n", str(args.workers)]
                before = len(stub.requests)
                started, wall, cpu, peak_mb, code = timed_run(argv)
                sent = [r["time"] - started for r in stub.requests[before:] if r["path"].endswith("/chat/completions")]
                gold_wall = gold_wall or wall
                # waves of instances in flight: as many as the pool keeps and the requests' ceiling lets send at once
                waves = math.ceil(instances / min(in_flight, ceiling // max(1, width)))
                first, last = (min(sent), stub.last_answer - started) if sent else (math.nan, math.nan)
                rows.append((label, wall, wall - gold_wall, args.latency * steps * waves, cpu, peak_mb, len(sent),
                             first, last, code))
            rounds.append(rows)

    print(f"latency {args.latency} s per completion, {instances} instances, {in_flight} instances in flight "
          f"(a team's: as many as {ceiling} requests take)"
          + (f", -n {args.workers}" if args.workers else "")
          + f"; load average {', '.join(f'{load:.1f}' for load in loads)} at the start of each round")
    print(f"{'run':<31}{'wall s':>8}{'over gold s':>13}{'ideal s':>9}{'CPU s':>7}{'peak MB':>9}{'requests':>10}"
          f"{'1st request':>13}{'last answer':>13}{'exit':>6}")
    shown = [row for rows in rounds for row in rows]
    if len(rounds) > 1:  # each round's rows, then per run the median of each column
        shown += [(f"{label} (median)", *(statistics.median(row[i] for rows in rounds for row in rows
                                                            if row[0] == label) for i in range(1, 10)))
                  for label, *_ in SHAPES]
    for label, wall, over, ideal, cpu, peak, requests, first, last, code in shown:
        print(f"{label:<31}{wall:>8.1f}{over:>13.1f}{ideal:>9.1f}{cpu:>7.1f}{peak:>9.0f}{requests:>10.0f}"
              f"{first:>13.1f}{last:>13.1f}{code:>6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
