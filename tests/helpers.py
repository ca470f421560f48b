"""What several test modules share: the eval IDs, running the benchmark in a subprocess (`bench`,
`run_command`, `pytest_with_cache`), a scripted endpoint's answers (`task_of`, `mixed`), comparing
results folders, starting llama-cpp-python's server as a user starts it (`llama_cpp_python_server`),
and reading the HTML report in headless Chromium (`browse`, `Page`). Test modules import these from
here, never from one another; fixtures are in conftest.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import struct
import sys
import time
from contextlib import contextmanager
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
from openai_stub import Reply

from apibank_bench.agents.prompts import format_history
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.data import manifests
from apibank_bench.data.tasks import get_task
from apibank_bench.runs.results import read_jsonl

EVAL_IDS = manifests.manifest_ids("all")
#: A sweep of four cells, and the cells' labels (test_sweep, test_slurm_sweep).
SWEEP_GRID = ("--topology", "single,independent", "--team-size", "2,4")
SWEEP_CELLS = ["topology=single,team_size=2", "topology=single,team_size=4",
               "topology=independent,team_size=2", "topology=independent,team_size=4"]
TIMING = {"latency_s"}  #: the fields of a results line that differ between two runs of the same answers


def bench(out_dir: Path, *args: str, env: dict | None = None, wait: bool = True):
    """`pytest bench_tests ...` in a subprocess, results into out_dir."""
    command = [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-p", "no:cacheprovider",
               "--apibank-out-dir", str(out_dir), *args]
    full_env = {**os.environ, **(env or {})}
    if not wait:  # a run to interrupt: Ctrl-C must reach it even if this suite was started with SIGINT
        # ignored (a shell's background job, `cmd &`, has it ignored, and a child inherits that)
        return subprocess.Popen(command, cwd=PROJECT_ROOT, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return subprocess.run(command, cwd=PROJECT_ROOT, env=full_env, capture_output=True, text=True, timeout=600)


#: The fields of a results line that two runs of the same answers share, whatever ran them.
STABLE = ("id", "level", "correct", "stage", "error", "predicted_call", "gold_call")


def stable(lines: list[dict]) -> list[dict]:
    return [{key: line.get(key) for key in STABLE} for line in lines]


def run_command(out_dir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`apibank-bench run --out-dir out_dir ...` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(out_dir), *args],
                          cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=600)


def pytest_with_cache(out: Path, cache_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """`pytest bench_tests` with pytest's own cache on (in `cache_dir`), as `--lf` needs it."""
    command = [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-o",
               f"cache_dir={cache_dir}", "--apibank-out-dir", str(out), *args]
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)


@cache
def _histories() -> dict:
    return {format_history(task): task for task in (get_task(task_id) for task_id in EVAL_IDS[:40])}


def task_of(body: dict):
    """The eval task a request is about (the longest dialogue of the first 40 its prompt contains)."""
    prompt = body["messages"][-1]["content"]
    matches = [(history, task) for history, task in _histories().items() if history and history in prompt]
    return max(matches, key=lambda pair: len(pair[0]))[1]


def mixed(body: dict) -> Reply:
    """Gold for every other instance, a wrong call for the rest: a fixed answer per instance."""
    task = task_of(body)
    return Reply(text=f"[{task.gold_call[1:-1]}]" if EVAL_IDS.index(task.combined_id) % 2 == 0
                 else "[NoSuchApi(x='1')]")


def comparable(out_dir: Path) -> tuple[list, list]:
    """A folder's results lines without their timings, and its predictions lines."""
    results = [{k: v for k, v in line.items() if k not in TIMING} for line in read_jsonl(out_dir / "results.jsonl")]
    return results, read_jsonl(out_dir / "predictions.jsonl")


def written_rows(out: Path) -> list[dict]:
    """results.jsonl's readable lines so far (a plain reading, not the package's: a line being written,
    or cut by a kill, is not one yet)."""
    path = out / "results.jsonl"
    rows = []
    for line in path.read_bytes().splitlines() if path.is_file() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def wait_ready(server: subprocess.Popen, url: str, log: Path) -> None:
    """Until the OpenAI-compatible server at `url` lists a model; fails on its exit, with its log."""
    import urllib.request

    deadline = time.monotonic() + 300  # a guard against a server that never comes up
    while time.monotonic() < deadline:
        assert server.poll() is None, f"the server exited ({server.returncode}):\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as answer:
                if json.loads(answer.read()).get("data"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the server did not come up:\n{log.read_text()[-3000:]}")


@contextmanager
def llama_cpp_python_server(model: Path, chat_format: str, log: Path, *options: str):
    """`python -m llama_cpp.server --model MODEL --chat_format FORMAT [options] --port P`, as a user starts it
    (its own port, so that tests can run side by side); yields its base URL, kills it after."""
    from apibank_bench.llm.embedded_launcher import free_port

    port = free_port()
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--chat_format",
                                   chat_format, *options, "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}/v1"
    try:
        wait_ready(server, url, log)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def chromium() -> str:
    """The browser; its absence fails in CI (CI must install it) and skips on a developer's machine."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (CI installs the Debian package `chromium`)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def browse(index: Path, profile: Path, *mode: str) -> subprocess.CompletedProcess:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", *mode, index.resolve().as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)


class Page(HTMLParser):
    """What the test needs from the browser's DOM: tables, images, links."""

    def __init__(self) -> None:
        super().__init__()
        self.tables, self.scripts, self.images, self.links, self.headings, self.titles = 0, 0, [], [], [], []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tables += tag == "table"
        self.scripts += tag == "script"
        if "title" in attrs:
            self.titles.append(attrs["title"])
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag == "a":
            self.links.append(attrs.get("href", ""))
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.headings.append(data)
            self._in_h2 = False


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, metadata: dict, tokens: int = 5) -> Path:
    """A GGUF header (version 3, no tensors) with string and uint32 values and a token array."""
    items = []
    for key, value in metadata.items():
        if isinstance(value, str):
            items.append(_string(key) + struct.pack("<I", 8) + _string(value))
        else:
            items.append(_string(key) + struct.pack("<I", 4) + struct.pack("<I", value))
    array = _string("tokenizer.ggml.tokens") + struct.pack("<I", 9) + struct.pack("<IQ", 8, tokens) + b"".join(
        _string(f"tok{i}") for i in range(tokens))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(items) + 1) + b"".join(items) + array)
    return path


def layer_table() -> list[tuple[str, list[str]]]:
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers: start -->", 1)[1].split("<!-- layers: end -->", 1)[0]
    rows = [line for line in block.strip().splitlines()[2:] if line.startswith("|")]
    table = []
    for row in rows:
        layer, places = [cell.strip() for cell in row.strip("|").split("|")][:2]
        table.append((layer, [name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", places)]))
    return table


def layer_of() -> dict[str, int]:
    return {name: index for index, (_, names) in enumerate(layer_table()) for name in names}


_COUNTED_RUN = """
import collections, importlib, json, sys
from apibank_bench.cli import main

counts = collections.Counter()

def counted(name, function):
    def call(*args, **kwargs):
        counts[name] += 1
        return function(*args, **kwargs)
    return call

for name, (module, attribute) in json.loads(sys.argv[1]).items():
    owner = importlib.import_module(module)
    *path, last = attribute.split(".")
    for step in path:
        owner = getattr(owner, step)
    setattr(owner, last, counted(name, getattr(owner, last)))
code = main(sys.argv[2:])
print("counted", json.dumps({"code": code, **counts}))
"""


def counted_run(argv: list[str], targets: dict[str, tuple[str, str]]) -> dict:
    """`apibank-bench ARGV` in a fresh process, each target (its module, and a function or `Class.method` of it)
    counted as it is called: the exit code and the counts (the same names as `targets`)."""
    done = subprocess.run([sys.executable, "-c", _COUNTED_RUN, json.dumps(targets), *argv], capture_output=True,
                          text=True, timeout=300)
    line = next((line for line in done.stdout.splitlines() if line.startswith("counted ")), None)
    assert line is not None, done.stdout[-3000:] + done.stderr[-3000:]
    return {name: 0 for name in targets} | json.loads(line.removeprefix("counted "))
