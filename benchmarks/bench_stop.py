"""How fast Ctrl-C and SIGTERM end a run whose requests in flight would take minutes.

`apibank-bench run` over 6 Level-1 instances against the scripted OpenAI-protocol server of the tests,
which answers the first two at once and every other one after `--slow` seconds (default 600): once the
two rows are written and the four slow requests are in flight, the run is signalled, and the seconds
from the signal to the process's exit are reported. Ctrl-C goes to the run's process group (as a
terminal sends it), SIGTERM to its main process alone (`kill PID`); each with one process and with two
xdist workers. `--embedded` also measures the embedded model (llama-cpp-python serving Gemma 3 270M), signalled
once its first row is written while the next completion is being generated.

    python benchmarks/bench_stop.py [--slow 600] [--give-up 120] [--embedded | --embedded-only]

A run still alive `--give-up` seconds after its signal is killed and reported as "> give-up".
`--project DIR` measures another checkout's code (for a before/after comparison: the run starts there,
with DIR first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server of the tests

FAST = 2
INSTANCES = 6


def level1_ids(count: int) -> list[str]:
    from apibank_bench.data import manifests

    return [task_id for task_id in manifests.manifest_ids("all") if task_id.startswith("level-1::")][:count]


def slow_after_first(ids: list[str], slow: float):
    """Replies: the first FAST instances at once, the others after `slow` seconds (matched by their history)."""
    from apibank_bench.agents.prompts import format_history
    from apibank_bench.data.tasks import get_task
    from openai_stub import Reply

    histories = {format_history(get_task(task_id)): task_id for task_id in ids}

    def reply(body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        task_id = max(((h, t) for h, t in histories.items() if h and h in prompt), key=lambda ht: len(ht[0]))[1]
        return Reply() if task_id in ids[:FAST] else Reply(delay=slow)

    return reply


def rows(out_dir: Path) -> int:
    path = out_dir / "results.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


PROJECT = ROOT  #: the checkout whose code is measured (`--project`)


def start(args: list[str], out_dir: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "apibank_bench", "run", "--no-cache", "--out-dir", str(out_dir), *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def stop_seconds(run: subprocess.Popen, how: str, give_up: float) -> float | None:
    """Signal the run; seconds until it exits (None: still there after `give_up`, then killed)."""
    signalled = time.monotonic()
    if how == "ctrl-c":
        os.killpg(run.pid, signal.SIGINT)
    else:
        run.send_signal(signal.SIGTERM)
    try:
        run.wait(give_up)
        return time.monotonic() - signalled
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        return None


def wait_for(condition, run: subprocess.Popen, what: str, seconds: float = 900) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if run.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the run ended or stalled before {what} (exit {run.poll()})")
        time.sleep(0.05)


def remote(how: str, workers: int, slow: float, give_up: float) -> tuple[float | None, int]:
    from openai_stub import OpenAIStub

    ids = level1_ids(INSTANCES)
    with OpenAIStub(default=slow_after_first(ids, slow)) as stub, tempfile.TemporaryDirectory() as folder:
        out_dir = Path(folder)
        run = start(["--model", "stub", "--base-url", stub.url, "--only", ",".join(ids), "--limit", "0",
                     "--timeout", str(slow * 2), *(["--workers", str(workers)] if workers else [])], out_dir)
        wait_for(lambda: rows(out_dir) == FAST and stub.active == INSTANCES - FAST, run, "the slow requests")
        seconds = stop_seconds(run, how, give_up)
        return seconds, run.returncode


def embedded(how: str, give_up: float) -> tuple[float | None, int]:
    with tempfile.TemporaryDirectory() as folder:
        out_dir = Path(folder)
        run = start(["--limit", "4"], out_dir)
        wait_for(lambda: rows(out_dir) >= 1, run, "the first row")
        time.sleep(1.0)  # the next completion is being generated
        seconds = stop_seconds(run, how, give_up)
        return seconds, run.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=float, default=600.0, help="seconds a slow answer takes")
    parser.add_argument("--give-up", type=float, default=120.0, help="seconds after the signal before a kill")
    parser.add_argument("--embedded", action="store_true", help="also the embedded model (starts llama-cpp-python)")
    parser.add_argument("--embedded-only", action="store_true", help="only the embedded model")
    parser.add_argument("--project", type=Path, default=ROOT, help="the checkout whose code is measured")
    args = parser.parse_args()
    global PROJECT
    PROJECT = args.project.resolve()
    cases = [(f"{how}, {f'{workers} workers' if workers else 'one process'}",
              lambda how=how, workers=workers: remote(how, workers, args.slow, args.give_up))
             for workers in (0, 2) for how in ("ctrl-c", "sigterm")] if not args.embedded_only else []
    if args.embedded or args.embedded_only:
        cases += [(f"{how}, embedded model", lambda how=how: embedded(how, args.give_up))
                  for how in ("ctrl-c", "sigterm")]
    print(f"| stopped by | seconds from the signal to exit (answers pending: {args.slow:g} s) | exit code |")
    print("| --- | --- | --- |")
    for name, case in cases:
        seconds, code = case()
        shown = f"{seconds:.2f}" if seconds is not None else f"> {args.give_up:g} (killed)"
        print(f"| {name} | {shown} | {code} |", flush=True)


if __name__ == "__main__":
    main()
