"""Default runs against stand-ins that behave like the servers researchers use (issue 29).

- `slots`: a server that works on K completions at a time for `--service` seconds each and queues
  the rest in order (llama-cpp-python's server: K=1; llama.cpp's `llama-server`: its slots; a
  one-GPU vLLM at its batch limit), for K = 1, 2, 4, 8: the server's busy span (first request in to
  last answer out) against its ideal, instances x service / K (target: within 25 %), the run's
  wall time above the gold self-check's (the harness's own cost), the longest queue the server
  saw, and the learned limit. A default run keeps 32 instances in flight.
- `bursts`: a wide server whose first 40 requests fail (503, then connection resets) in a
  100-instance run: exit code, error rows, requests, wall time.
- `dead`: `bench_faults.py dead` measures how soon a dead endpoint stops a run (seconds from the
  server's SIGKILL to the run's exit); run it beside this one.

    python benchmarks/bench_servers.py [slots|bursts|both] [--service 0.2] [--limit 100] [-n N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from openai_stub import OpenAIStub, Reply, burst, reset  # noqa: E402


def run(out: Path, url: str, limit: int, *extra: str) -> tuple[float, int, dict, list[dict]]:
    """`apibank-bench run` with default settings: wall seconds, exit code, summary, rows."""
    argv = [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(out), "--limit", str(limit),
            "--no-cache", "--base-url", url, *extra]
    started = time.perf_counter()
    code = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()] \
        if (out / "results.jsonl").exists() else []
    return wall, code, summary, rows


def gold_wall(tmp: Path, limit: int) -> float:
    argv = [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(tmp / "gold"), "--limit", str(limit),
            "--model", "gold"]
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def slots(args, tmp: Path) -> None:
    gold = gold_wall(tmp, args.limit)
    print(f"servers serving K at a time, {args.service} s a completion, {args.limit} instances, default run"
          + (f", -n {args.workers}" if args.workers else "") + f" (gold self-check {gold:.1f} s)")
    print(f"{'K':>3}{'ideal s':>9}{'busy s':>8}{'busy/ideal':>12}{'wall-gold s':>13}{'max queue':>11}"
          f"{'median queue':>14}{'limit final':>13}{'errors':>8}{'exit':>6}")
    for k in (1, 2, 4, 8):
        with OpenAIStub(default=Reply(), hold=args.service, slots=k) as server:
            extra = ("--model", "stub", *(("-n", str(args.workers)) if args.workers else ()))
            wall, code, summary, rows = run(tmp / f"k{k}", server.url, args.limit, *extra)
            first = server.requests[0]["time"] if server.requests else 0.0
            busy = server.last_answer - first
            seen = sorted(server.queue_seen)
        ideal = args.limit * args.service / k
        limits = [record["final"] for endpoint in summary.get("endpoints", {}).values()
                  for record in endpoint.get("in_flight_limit", [])]
        errors = sum(row["stage"] == "error" for row in rows)
        print(f"{k:>3}{ideal:>9.1f}{busy:>8.1f}{busy / ideal:>12.2f}{wall - gold:>13.1f}{max(seen or [0]):>11}"
              f"{seen[len(seen) // 2] if seen else 0:>14}{'+'.join(map(str, limits)):>13}{errors:>8}{code:>6}")


def bursts(args, tmp: Path) -> None:
    print(f"a wide server ({args.service} s a completion) whose first 40 requests fail, {args.limit} instances")
    print(f"{'burst':<10}{'exit':>6}{'error rows':>12}{'requests':>10}{'wall s':>8}")
    for label, failure in (("503", Reply(status=503)), ("reset", reset())):
        with OpenAIStub(*burst(40, failure), default=Reply(), hold=args.service) as server:
            wall, code, _, rows = run(tmp / label, server.url, args.limit, "--model", "stub")
            requests = len(server.chat_requests)
        print(f"{label:<10}{code:>6}{sum(row['stage'] == 'error' for row in rows):>12}{requests:>10}{wall:>8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="both", choices=("slots", "bursts", "both"))
    parser.add_argument("--service", type=float, default=0.2, help="seconds per completion (default 0.2)")
    parser.add_argument("--limit", type=int, default=100, help="instances (default 100)")
    parser.add_argument("-n", "--workers", default=None, help="xdist workers (default: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.what in ("slots", "both"):
            slots(args, Path(tmp))
        if args.what in ("bursts", "both"):
            bursts(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
