"""A run against an endpoint that fails: how fast a dead endpoint stops it, and what faults cost.

Two scenarios, each against a local OpenAI-protocol server in its own process (the
scripted server of the test suite; its answer to a request depends only on the
request, so every run of a scenario can be compared line by line with a clean run):

- `dead`: a decentralized debate (N=4, R=2) over the 100 eval instances with default
  settings; the server is SIGKILLed once it has answered a third of a clean run's requests. It
  reports the seconds from the server's death to the run's exit, checks that every
  instance is a results line or counted as not run, then brings the server back on
  the same port, resumes, and compares the results with an uninterrupted run.
- `faults`: the same run while 25 % of requests fail (500, 503, 429, connection
  resets, bodies cut in half), the run's process group is SIGKILLed three times, and
  the server is down for a few seconds once; each stop is followed by `--resume`
  until the run is complete. It compares the results with a clean run's and reports
  the requests made against the clean run's.

    python benchmarks/bench_faults.py [dead|faults|both] [--hold 0.2] [--toolsearcher]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

from helpers import written_rows  # noqa: E402 - the tests' reading of a results file, as it grows

#: No ToolSearcher call among them: scoring one loads the search's embedding model once per process
#: (tens of seconds on a loaded 2-core machine), which would be timed as the run's reaction to the dead
#: endpoint; `--toolsearcher` adds one.
ANSWERS = ("[GetToday()]", "[QueryMeeting(user_name='John')]", "[GetUserToken(username='JohnDoe', password='pass123')]",
           "[NoSuchApi(x='1')]")
TOOLSEARCHER = "[ToolSearcher(keywords='meeting')]"
DEBATE = ["--model", "stub", "--topology", "decentralized", "--team-size", "4", "--rounds", "2", "--limit", "0"]
TIMING = {"latency_s"}


# -- the server (run as `bench_faults.py serve PORT LOG FAULT_RATE SEED HOLD`) ------------------

def answer_for(body: dict, answers: tuple[str, ...] = ANSWERS) -> str:
    """A fixed answer per request: the same request always gets the same answer."""
    digest = hashlib.sha256(json.dumps([body.get("messages"), body.get("seed")], sort_keys=True).encode()).digest()
    return answers[digest[0] % len(answers)]


def serve(port: int, log: Path, fault_rate: float, seed: int, hold: float, answers: tuple[str, ...]) -> None:
    from openai_stub import OpenAIStub, Reply, cut, error, reset

    faults = [lambda: error(500), lambda: error(503), lambda: error(429), reset, cut]
    rng = random.Random(seed)
    handle = open(log, "a", encoding="utf-8")

    def reply(body: dict) -> Reply:
        handle.write("1\n")  # one line per chat request: the count survives a SIGKILL
        handle.flush()
        if rng.random() < fault_rate:
            return rng.choice(faults)()
        return Reply(text=answer_for(body, answers))

    stub = OpenAIStub(default=reply, hold=hold, port=port).start()
    stub._server.request_queue_size = 256
    print(stub.url, flush=True)
    signal.pause()


class Server:
    """The scripted server in its own process, so that killing it drops every connection at once."""

    answers = ANSWERS

    def __init__(self, log: Path, fault_rate: float = 0.0, seed: int = 0, hold: float = 0.2) -> None:
        self.log, self.fault_rate, self.seed, self.hold = log, fault_rate, seed, hold
        self.port = 0
        self.process: subprocess.Popen | None = None

    def start(self) -> "Server":
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", str(self.port), str(self.log), str(self.fault_rate),
             str(self.seed), str(self.hold), *self.answers], stdout=subprocess.PIPE, text=True)
        url = self.process.stdout.readline().strip()
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.seed += 1  # a restarted server draws other faults
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def requests(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


# -- runs ---------------------------------------------------------------------------------------

def run_argv(out: Path, cache: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(out), "--cache-dir", str(cache),
            "--base-url", url, *DEBATE, *extra]


def start(argv: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log, "a") as handle:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def comparable(out: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in written_rows(out)]


def summary(out: Path) -> dict:
    path = out / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_rows(out: Path, process: subprocess.Popen, count: int) -> None:
    while len(written_rows(out)) < count and process.poll() is None:
        time.sleep(0.05)


def clean_run(tmp: Path, hold: float) -> tuple[list[dict], int]:
    server = Server(tmp / "clean.requests", hold=hold).start()
    try:
        process = start(run_argv(tmp / "clean", tmp / "clean-cache", server.url), tmp / "clean.log")
        process.wait()
        return comparable(tmp / "clean"), server.requests()
    finally:
        server.kill()


def dead(tmp: Path, hold: float, reference: list[dict], clean_requests: int) -> bool:
    server = Server(tmp / "dead.requests", hold=hold).start()
    out, cache = tmp / "dead", tmp / "dead-cache"
    process = start(run_argv(out, cache, server.url), tmp / "dead.log")
    while server.requests() < clean_requests // 3 and process.poll() is None:  # a third of the way
        time.sleep(0.02)
    server.kill()
    died = time.monotonic()
    code = process.wait()
    seconds = time.monotonic() - died
    found = summary(out)
    ids = {row["id"] for row in written_rows(out)}
    finished = sum(row["stage"] != "error" for row in written_rows(out))
    print(f"dead endpoint: the run exited {seconds:.1f} s after the server died (exit {code}); "
          f"{finished} finished, {found.get('errors')} error rows, {found.get('not_run')} not run "
          f"(of {found.get('selected')})")
    accounted = len(ids) + (found.get("not_run") or 0) == 100
    server.start()  # back on the same port
    try:
        resumed = start(run_argv(out, cache, server.url, "--resume"), tmp / "dead.log").wait()
    finally:
        server.kill()
    same = comparable(out) == reference
    print(f"  resumed: exit {resumed}, complete {summary(out).get('complete')}, identical to a clean run: {same}, "
          f"every unfinished instance accounted for: {accounted}")
    return seconds <= 30 and accounted and same and resumed == 0


def faults(tmp: Path, hold: float, reference: list[dict], clean_requests: int) -> bool:
    server = Server(tmp / "faults.requests", fault_rate=0.25, hold=hold).start()
    out, cache = tmp / "faults", tmp / "faults-cache"
    kills_at, outage_at = (15, 40, 65), 80
    runs = 0
    try:
        while True:
            process = start(run_argv(out, cache, server.url, *(["--resume"] if runs else [])), tmp / "faults.log")
            runs += 1
            while process.poll() is None:
                done = len(written_rows(out))
                if kills_at and done >= kills_at[0]:
                    kills_at = kills_at[1:]
                    os.killpg(process.pid, signal.SIGKILL)
                    print(f"  SIGKILL of the run at {done} lines")
                elif outage_at and done >= outage_at:
                    outage_at = None
                    server.kill()
                    print(f"  endpoint down at {done} lines for 5 s")
                    time.sleep(5)
                    server.start()
                time.sleep(0.05)
            if summary(out).get("complete"):
                break
            if runs > 12:
                print("  gave up after 12 runs")
                return False
    finally:
        server.kill()
    same = comparable(out) == reference
    ids = [row["id"] for row in written_rows(out)]
    ratio = server.requests() / clean_requests
    print(f"faults: {runs} runs; identical to a clean run: {same}; {len(ids)} lines, {len(set(ids))} distinct; "
          f"{server.requests()} requests = {ratio:.2f}x the clean run's {clean_requests}")
    return same and len(ids) == len(set(ids)) == 100 and ratio <= 1.5


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        port, log, rate, seed, hold = sys.argv[2:7]
        serve(int(port), Path(log), float(rate), int(seed), float(hold), tuple(sys.argv[7:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", nargs="?", default="both", choices=("dead", "faults", "both"))
    parser.add_argument("--hold", type=float, default=0.2, help="seconds the server takes per request (default 0.2)")
    parser.add_argument("--toolsearcher", action="store_true", help="answer ToolSearcher calls too")
    args = parser.parse_args()
    if args.toolsearcher:
        Server.answers = (*ANSWERS, TOOLSEARCHER)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        reference, clean_requests = clean_run(tmp, args.hold)
        print(f"clean run: {len(reference)} lines, {clean_requests} requests")
        ok = True
        if args.scenario in ("dead", "both"):
            ok &= dead(tmp, args.hold, reference, clean_requests)
        if args.scenario in ("faults", "both"):
            ok &= faults(tmp, args.hold, reference, clean_requests)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
