"""Routing by load against round-robin, over two local endpoints of which one answers 4x slower.

Starts two scripted OpenAI-compatible servers on 127.0.0.1 (the test suite's), one
answering every completion after `--latency` seconds and one after 4x that, and
times `apibank-bench run` (single agent, the 100 eval instances, no cache) with
`--routing load` and with `--routing round_robin`. Then it runs once more with the
second URL pointing at a port where nothing listens: the run must finish on the live
endpoint with no error rows. Per run it prints the wall time, the requests each
endpoint answered (from summary.json's `endpoints`) and the error rows.

    python benchmarks/bench_routing.py [--latency 5] [--limit 0]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from openai_stub import OpenAIStub, Reply  # noqa: E402


def dead_url() -> str:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def timed_run(urls: list[str], routing: str, out: Path, limit: int) -> tuple[float, dict, int, int]:
    """Wall seconds, summary.json's endpoints, error rows, exit code."""
    argv = [sys.executable, "-m", "apibank_bench", "run", "--limit", str(limit), "--no-cache", "--model", "stub",
            "--base-url", *urls, "--routing", routing, "--out-dir", str(out)]
    started = time.perf_counter()
    code = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    return wall, summary.get("endpoints", {}), summary["errors"], code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=5.0,
                        help="the fast endpoint's seconds per completion (default 5: long enough that the endpoints, "
                        "not the harness's own work, set the pace on a busy machine)")
    parser.add_argument("--limit", type=int, default=0, help="eval instances (0 = all 100)")
    args = parser.parse_args()
    rows = []
    with OpenAIStub(default=Reply(text="[GetToday()]"), hold=args.latency) as fast, \
            OpenAIStub(default=Reply(text="[GetToday()]"), hold=4 * args.latency) as slow, \
            tempfile.TemporaryDirectory() as tmp:
        for stub in (fast, slow):
            stub._server.request_queue_size = 256
        names = {fast.url: "fast", slow.url: "slow 4x"}
        dead = dead_url()
        names[dead] = "dead"
        for label, urls, routing in [("round_robin", [fast.url, slow.url], "round_robin"),
                                     ("load", [fast.url, slow.url], "load"),
                                     ("load, one endpoint dead", [fast.url, dead], "load")]:
            wall, endpoints, errors, code = timed_run(urls, routing, Path(tmp) / label.split(",")[0], args.limit)
            served = ", ".join(f"{names.get(url, url)} {part['requests']} ({part['errors']} failed)"
                               for url, part in endpoints.items())
            rows.append((label, wall, served, errors, code))
    base = rows[0][1]
    print(f"fast endpoint {args.latency} s per completion, slow {4 * args.latency} s; "
          f"{args.limit or 100} instances, single agent")
    print(f"{'routing':<26}{'wall s':>8}{'x round-robin':>15}{'error rows':>12}{'exit':>6}  requests per endpoint")
    for label, wall, served, errors, code in rows:
        print(f"{label:<26}{wall:>8.1f}{wall / base:>15.2f}{errors:>12}{code:>6}  {served}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
