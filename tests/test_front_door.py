"""What a person sees: `run` ends with its closing table, pytest users keep pytest's output,
the progress line, and `apibank-bench show` of one instance of every topology."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apibank_bench.cli import main as cli_main
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.core.progress import ERASE, ProgressLine, duration, eta
from apibank_bench.runs.results import TRACES, read_jsonl, trace_name
from apibank_bench.runs.summary import table_lines

from openai_stub import OpenAIStub, Reply
from helpers import bench

WRONG = Reply(text="[AddAlarm(time='never')]")


def run_command(out_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(out_dir),
                           "--cache-dir", str(out_dir.parent / "cache"), *args],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)


def test_a_100_instance_run_ends_with_its_closing_table_and_no_failed_line(tmp_path):
    out = tmp_path / "run"
    with OpenAIStub(default=WRONG) as stub:
        run = run_command(out, "--limit", "100", "--model", "stub", "--base-url", stub.url)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]  # wrong answers are results
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 100 and summary["correct"] < 50
    lines = run.stdout.rstrip("\n").splitlines()
    start = next(i for i, line in enumerate(lines) if "API-Bank: single / stub" in line)
    # The last lines are the table (exactly the summary's), then where the results are.
    assert lines[start + 1:-1] == table_lines(summary)
    assert lines[-1].startswith(f"results: {out.resolve()}")
    assert "FAILED" not in run.stdout and "FAILURES" not in run.stdout
    assert "100 wrong" in run.stdout
    # No plugin noise: the anyio rewrite warning, pytest-benchmark's header.
    assert "PytestAssertRewriteWarning" not in run.stdout + run.stderr and "benchmark:" not in run.stdout


def test_run_passes_what_follows_the_double_dash_to_pytest_and_is_quiet_with_q(tmp_path):
    with OpenAIStub(default=WRONG) as stub:
        quiet = run_command(tmp_path / "quiet", "-q", "--limit", "3", "--model", "stub", "--base-url", stub.url)
        passed = run_command(tmp_path / "passed", "--limit", "3", "--model", "stub", "--base-url", stub.url,
                             "--", "--co")
    assert quiet.returncode == 0, quiet.stdout[-2000:] + quiet.stderr[-2000:]
    assert "test session starts" not in quiet.stdout and "API-Bank: single / stub" in quiet.stdout
    # `--co` reached pytest: the tests are listed, none is run.
    assert "test_apibank[" in passed.stdout and not (tmp_path / "passed" / "results.jsonl").exists()


def test_pytest_users_keep_pytest_s_own_output(tmp_path):
    with OpenAIStub(default=WRONG) as stub:
        run = bench(tmp_path, "--apibank-model", "stub", "--apibank-base-url", stub.url, "--apibank-limit", "3",
                    "--apibank-no-cache")
    assert run.returncode == 1, run.stdout[-2000:]
    assert run.stdout.count("FAILED bench_tests") == 3 and "3 failed" in run.stdout
    assert "API-Bank: single / stub" in run.stdout


def test_a_topology_s_unread_settings_are_warned_about(tmp_path):
    run = run_command(tmp_path / "run", "--model", "gold", "--limit", "1", "--topology", "single",
                      "--team-size", "3", "--rounds", "4")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--team-size 3 changes nothing: --topology single" in run.stdout
    assert "--rounds 4 changes nothing" in run.stdout
    quiet = run_command(tmp_path / "debate", "--model", "gold", "--limit", "1", "--topology", "decentralized",
                        "--rounds", "1")
    assert "changes nothing" not in quiet.stdout


# -- the progress line -------------------------------------------------------------------------


def test_a_live_line_is_redrawn_in_place_and_erased():
    stream = io.StringIO()
    count = itertools.count(1)
    line = ProgressLine(lambda: f"step {next(count)}", stream, live=True)
    line.update()
    line.update()
    line.say("a line of its own")
    line.clear()
    text = stream.getvalue()
    assert text == (f"{ERASE}step 1{ERASE}step 2{ERASE}a line of its own\n{ERASE}step 3{ERASE}")
    assert "\n" not in text.replace("a line of its own\n", "")  # the live line never scrolls the screen


def _terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal `columns` wide: (the side a program writes to, the side that reads the screen)."""
    import fcntl
    import pty
    import struct
    import termios

    screen, program = pty.openpty()
    fcntl.ioctl(program, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return program, screen


def _drawn(screen: int) -> str:
    import select

    chunks = []
    while select.select([screen], [], [], 0.2)[0]:
        try:
            chunk = os.read(screen, 65536)
        except OSError:  # the program's side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("columns", [80, 200])
def test_a_live_line_is_cut_to_the_width_of_its_own_terminal(columns, monkeypatch):
    """The width is asked of the terminal the line is drawn on, not of fd 1 (which pytest captures: this test's
    fd 1 is not a terminal, so asking it gave the 100-column fallback, too wide for 80 and too narrow for 200)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    program, screen = _terminal(columns)
    with os.fdopen(program, "w", encoding="utf-8") as stream:
        line = ProgressLine(lambda: "apibank: " + "x" * 400, stream)
        assert line.live
        line.update()
        drawn = _drawn(screen)
    os.close(screen)
    assert drawn.startswith(ERASE) and len(drawn) - len(ERASE) == columns - 1


@pytest.mark.parametrize("columns", [80, 200])
def test_run_s_progress_line_on_a_terminal_never_wraps(tmp_path, columns):
    """`apibank-bench run` on a terminal 80 or 200 columns wide: every drawing of the live line fits one line,
    and at 200 columns the rate and the ETA show."""
    program, screen = _terminal(columns)
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    with OpenAIStub(default=Reply(text="[GetToday()]", delay=1.5)) as stub:
        run = subprocess.Popen([sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(tmp_path / "run"),
                                "--model", "stub", "--base-url", stub.url, "--limit", "3", "--concurrency", "1",
                                "--no-cache"], cwd=PROJECT_ROOT, stdin=program, stdout=program, stderr=program,
                               env=env)
        os.close(program)
        screen_text = ""
        while run.poll() is None:
            screen_text += _drawn(screen)
        screen_text += _drawn(screen)
    os.close(screen)
    assert run.returncode == 0, screen_text[-3000:]
    drawings = [part.split("\r")[0].split("\n")[0] for part in screen_text.split(ERASE)[1:]]
    lines = [text for text in drawings if text.startswith("apibank: ") and " instances" in text]
    assert len(lines) >= 2, screen_text[-3000:]
    assert all(len(text) <= columns - 1 for text in lines), max(lines, key=len)
    if columns == 200:
        assert any("/s" in text and "ETA" in text for text in lines), lines


def test_plain_lines_come_at_most_every_so_often():
    stream = io.StringIO()
    rare = ProgressLine(lambda: "progress", stream, live=False, every_s=1e9)
    rare.update()
    rare.update()
    assert stream.getvalue() == ""
    often = ProgressLine(lambda: "progress", stream, live=False, every_s=0)
    often.update()
    often.update()
    assert stream.getvalue() == "progress\nprogress\n"


def test_eta_and_durations():
    assert eta(0, 10, 5.0) is None
    assert eta(5, 10, 50.0) == "50s" and eta(1, 100, 3.0) == "4m57s"
    assert duration(3725) == "1h02m"


# -- show -----------------------------------------------------------------------------------------

TOPOLOGIES = ["single", "independent", "decentralized", "centralized", "sequential", "agents_sdk"]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_show_prints_every_agent_turn_of_an_instance(tmp_path, topology, capsys):
    counter = itertools.count(1)
    # Every request gets its own answer, so each turn's answer can be found in the output.
    with OpenAIStub(default=lambda body: Reply(text=f"[GetToday(answer='{next(counter)}')]")) as stub:
        run = run_command(tmp_path / "run", "--limit", "1", "--model", "stub", "--base-url", stub.url,
                          "--topology", topology, "--team-size", "2", "--rounds", "1", "--no-cache")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    row = read_jsonl(tmp_path / "run" / "results.jsonl")[0]
    trace = json.loads((tmp_path / "run" / TRACES / trace_name(row["id"])).read_text())
    turns = trace["agents"]
    assert turns
    unprefixed = row["id"].split("::", 1)[1]
    assert cli_main(["show", unprefixed, "--out-dir", str(tmp_path / "run"), "--prompt-chars", "0"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("== turn ") == len(turns)
    for number, turn in enumerate(turns, start=1):
        assert f"== turn {number}: {turn['role']} #{turn['index']} (round {turn['round']}," in shown
        assert turn["answer"] in shown
        assert turn["messages"][-1]["content"].strip().splitlines()[-1] in shown  # the prompt's end
    assert f"gold call:   {row['gold_call']}" in shown and f"scored call: {row['predicted_call']}" in shown
    assert f"stage:       {row['stage']}" in shown and "USER:" in shown  # the dialogue
    if "vote" in trace:
        assert "vote (reference rule)" in shown
    elif len(turns) > 1:
        assert "the team submits the last turn's answer" in shown


def test_show_says_where_the_ids_are(tmp_path, capsys):
    assert run_command(tmp_path / "run", "--model", "gold", "--limit", "1").returncode == 0
    assert cli_main(["show", "no-such-id", "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "has no instance 'no-such-id'" in err and "`id` field" in err and "level-1::" in err
    assert cli_main(["show", "x", "--out-dir", str(tmp_path / "nowhere")]) == 2
    assert "pass --out-dir" in capsys.readouterr().err
    from apibank_bench.core.settings import voice

    assert voice() == "pytest" and "APIBANK_VOICE" not in os.environ  # the command's voice ends with the command


def test_the_progress_line_reads_the_model_layer_s_counters():
    from types import SimpleNamespace

    from apibank_bench.plugin.progress import model_activity

    stats = SimpleNamespace(snapshot=lambda: {"cache_hits": 7})
    client = SimpleNamespace(limiter=SimpleNamespace(active=5), waiting=2, stats=stats)
    assert model_activity(client) == {"in_flight": 5, "waiting": 2, "cache_hits": 7}
    assert model_activity(None) == {}  # the gold self-check, or an xdist controller: nothing to read


def test_a_progress_line_left_running_is_stopped_before_the_interpreter_ends():
    # Its thread is a daemon: one still running as the interpreter finalizes is cut off wherever it is.
    import subprocess
    import sys

    script = ("import atexit, io, threading, time\n"
              "atexit.register(lambda: print('alive' if any(t.name == 'progress-line' and t.is_alive() "
              "for t in threading.enumerate()) else 'stopped'))\n"
              "from apibank_bench.core.progress import ProgressLine\n"
              "ProgressLine(lambda: 'x', io.StringIO(), live=True, interval_s=0.01).start()\n"
              "time.sleep(0.1)\n")
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (ended.returncode, ended.stdout.strip()) == (0, "stopped"), ended.stderr


def test_a_model_name_without_an_endpoint_is_refused_by_name_under_run_and_pytest(tmp_path):
    # Else the embedded model answered and its answers were recorded under the name given.
    from apibank_bench.core.exit_codes import ExitCode
    from apibank_bench.llm.embedded_launcher import LOCAL_MODEL

    env = {key: value for key, value in os.environ.items() if key not in {"OPENAI_BASE_URL", "APIBANK_BASE_URL"}}
    run = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "my-qwen-7b", "--limit", "1",
                          "--out-dir", str(tmp_path / "run")], cwd=PROJECT_ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == ExitCode.USAGE, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--model my-qwen-7b names no endpoint: give --base-url URL" in run.stderr
    assert f"whose name is {LOCAL_MODEL}" in run.stderr and "starting the embedded" not in run.stdout
    assert not (tmp_path / "run").exists()

    under_pytest = bench(tmp_path / "pytest", "--apibank-model", "my-qwen-7b", "--apibank-limit", "1", env=env)
    assert under_pytest.returncode == ExitCode.PYTEST_USAGE, under_pytest.stdout[-2000:] + under_pytest.stderr[-2000:]
    assert "--apibank-model my-qwen-7b names no endpoint: give --apibank-base-url URL" in under_pytest.stderr
    assert not (tmp_path / "pytest").exists()
