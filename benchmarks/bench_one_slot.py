"""How long requests wait in the queue of a server that answers one completion at a time, at 20 s each (issue 38).

A default `apibank-bench run` (single agent, no cache, 32 instances in flight) against the scripted
OpenAI-protocol server of the tests with one slot (`OpenAIStub(slots=1)`: it serves one request at a
time for `--service` seconds and queues the rest in arrival order, as llama-cpp-python's server does).
The server records when each request arrived and how long it waited for the slot. Printed: the wait
of every request sent once the first answer was in, in services (the target: at most 2), the first
wave's (sent before anything was known), how busy the server was, and the learned in-flight limit.

Time is scaled so that the benchmark is cheap: `--scale 0.1` (the default) serves each completion in
2 s instead of 20 s. The limiter's own clocks scale with it where it matters (its probe comes at most
once every 30 no-load latencies, which at 2 s is its 30 s period); the harness's own work between
answers does not, so a scaled run is the harder case for the limit. `--scale 1` is the real 20 s.

    python benchmarks/bench_one_slot.py [--scale 0.1] [--service 20] [--limit 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from openai_stub import OpenAIStub, Reply  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service", type=float, default=20.0, help="seconds per completion, unscaled (default 20)")
    parser.add_argument("--scale", type=float, default=0.1, help="time scale (default 0.1: 2 s a completion)")
    parser.add_argument("--limit", type=int, default=40, help="instances (default 40)")
    args = parser.parse_args()
    hold = args.service * args.scale
    with tempfile.TemporaryDirectory() as tmp, OpenAIStub(default=Reply(), hold=hold, slots=1) as server:
        out = Path(tmp) / "run"
        argv = [sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", server.url,
                "--limit", str(args.limit), "--no-cache", "--out-dir", str(out)]
        started = time.perf_counter()
        code = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        wall = time.perf_counter() - started
        waits = sorted(server.waits)
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    finished = [arrived + waited + hold for arrived, waited in waits]
    first_answer = min(finished)
    later = [waited / hold for arrived, waited in waits if arrived >= first_answer]
    wave = [waited / hold for arrived, waited in waits if arrived < first_answer]
    busy = (max(finished) - waits[0][0]) / (len(waits) * hold)
    limits = [record for endpoint in summary.get("endpoints", {}).values()
              for record in endpoint.get("in_flight_limit", [])]
    print(f"one slot, {args.service:g} s a completion scaled by {args.scale:g} ({hold:g} s), {args.limit} instances, "
          f"default run: exit {code}, {wall:.1f} s wall, {len(waits)} requests")
    # (a service as the stand-in times it is `hold` plus a few ms of its own thread switching: allowed 1 %)
    print(f"  sent once the first answer was in: {len(later)}; wait in services: max {max(later or [0]):.3f}, "
          f"median {statistics.median(later or [0]):.3f}, over 2: {sum(w > 2.02 for w in later)}")
    print(f"  the first wave (sent before any answer): {len(wave)}; wait in services: max {max(wave or [0]):.2f}")
    print(f"  server busy span / ideal: {busy:.2f}; in-flight limit: "
          + ", ".join(f"initial {r['initial']}, min {r['min']}, max {r['max']}, final {r['final']}" for r in limits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
