"""Throughput of a benchmark run against an endpoint with a fixed latency.

Starts a local OpenAI-compatible server that answers every completion after
`--latency` seconds (the scripted server of the test suite, on 127.0.0.1) with a
mix of calls, a third of them ToolSearcher calls with keywords never recorded (so
scoring them with the default scorers searches by embedding and loads the
embedding model), then times `apibank-bench run` on the eval instances for: the
gold self-check (no model: the harness's own cost), a single agent, and a
decentralized debate (N=4, R=2: two rounds in all, of four parallel requests). For
each it reports the wall time, the time above the gold self-check, the ideal
(latency x sequential model steps x ceil(instances / instances in flight)), the
run's peak memory, and where a model run's time goes: its first request, its last
answer and its exit, in seconds from its start.

    python benchmarks/bench_throughput.py [--latency 0.5] [--limit 0] [--concurrency K] [-n N]
"""

from __future__ import annotations

import argparse
import math
import zlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from openai_stub import OpenAIStub, Reply  # noqa: E402

#: (label, run flags, sequential model steps per instance)
SHAPES = [
    ("gold self-check", ["--model", "gold"], 0),
    ("single", ["--model", "stub", "--topology", "single"], 1),
    ("decentralized N=4 R=2", ["--model", "stub", "--topology", "decentralized", "--team-size", "4",
                               "--rounds", "2"], 2),
]

#: What the endpoint answers, picked by the request's text (so a rerun answers alike, whatever the order).
MIX = ("[ToolSearcher(keywords='a benchmark search never recorded')]", "[GetToday()]",
       "[AddAlarm(token='t', time='2023-03-25 08:30:00')]")


def mixed(body: dict) -> Reply:
    return Reply(text=MIX[zlib.crc32(body["messages"][-1]["content"].encode()) % len(MIX)])


def timed_run(argv: list[str]) -> tuple[float, float, float, int]:
    """Monotonic start, wall seconds, peak RSS in MB (the run's own process tree's largest), exit code."""
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    return started, wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per completion (default 0.5)")
    parser.add_argument("--limit", type=int, default=0, help="eval instances (0 = all 100)")
    parser.add_argument("--concurrency", type=int, default=None, help="instances in flight (default: the suite's)")
    parser.add_argument("-n", "--workers", default=None, help="xdist workers (default: none)")
    args = parser.parse_args()

    from apibank_bench.core.settings import resolve
    from apibank_bench.runs.instances import instances_in_flight
    from apibank_bench.runs.setting_rules import hand_down

    hand_down()  # this script resolves settings itself: the layers' choices and rules first

    in_flight = args.concurrency or instances_in_flight(resolve(lambda s: {"base_url": "http://x/v1", "model": "stub"}.get(s.name)))
    instances = args.limit or 100
    rows = []
    with OpenAIStub(default=mixed, hold=args.latency, owned_by="vllm") as stub, \
            tempfile.TemporaryDirectory() as tmp:
        gold_wall = None
        for label, flags, steps in SHAPES:
            argv = [sys.executable, "-m", "apibank_bench", "run", "--limit", str(args.limit), "--no-cache",
                    "--base-url", stub.url, "--out-dir", str(Path(tmp) / label.split()[0]), *flags]
            if args.concurrency:
                argv += ["--concurrency", str(args.concurrency)]
            if args.workers:
                argv += ["-n", str(args.workers)]
            before = len(stub.requests)
            started, wall, peak_mb, code = timed_run(argv)
            sent = [r["time"] - started for r in stub.requests[before:] if r["path"].endswith("/chat/completions")]
            gold_wall = wall if gold_wall is None else gold_wall
            ideal = args.latency * steps * math.ceil(instances / in_flight)
            first, last = (f"{min(sent):.1f}", f"{stub.last_answer - started:.1f}") if sent else ("-", "-")
            rows.append((label, wall, wall - gold_wall, ideal, peak_mb, len(sent), first, last, code))

    print(f"latency {args.latency} s per completion, {instances} instances, {in_flight} instances in flight"
          + (f", -n {args.workers}" if args.workers else ""))
    print(f"{'run':<24}{'wall s':>8}{'over gold s':>13}{'ideal s':>9}{'peak MB':>9}{'requests':>10}"
          f"{'1st request':>13}{'last answer':>13}{'exit':>6}")
    for label, wall, over, ideal, peak, requests, first, last, code in rows:
        print(f"{label:<24}{wall:>8.1f}{over:>13.1f}{ideal:>9.1f}{peak:>9.0f}{requests:>10}{first:>13}{last:>13}"
              f"{code:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
