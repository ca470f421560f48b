"""`report`: built from real results folders (and a sweep folder of them), opened in headless Chromium."""

import base64
import html
import json
import os
import re
import struct
import subprocess
import sys
from urllib.parse import unquote

import pytest
from openai_stub import OpenAIStub, Reply
from helpers import browse, Page
from results_folders import eval_tasks, score_folder

from apibank_bench.cli import main as cli_main
from apibank_bench.core.paths import PROJECT_ROOT

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = '"><script>document.title="owned"</script><img src=x onerror=console.log(2)>'


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(tmp_path_factory, apibank_root):
    """A gold run over the eval set (with traces), a debate's run on 2 instances (traces with agent turns),
    and a sweep folder of two `score` folders with its tables."""
    tmp = tmp_path_factory.mktemp("report")
    tasks = eval_tasks(apibank_root)
    gold = tmp / "gold_run"
    env = {**os.environ, "APIBANK_ROOT": str(apibank_root)}
    subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "gold", "--limit", "0",
                    "--out-dir", str(gold)], cwd=PROJECT_ROOT, check=True, capture_output=True, env=env)
    debate = tmp / "debate"
    with OpenAIStub(default=Reply(text="[GetToday(when='now')]")) as stub:
        subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url", stub.url,
                        "--topology", "decentralized", "--team-size", "2", "--rounds", "2", "--limit", "2",
                        "--no-cache", "--out-dir", str(debate)], cwd=PROJECT_ROOT, check=True, capture_output=True,
                       env=env)
    sweep = tmp / "sweep"
    sweep.mkdir()
    score_folder(sweep, "all_right", tasks, wrong=set())
    some_wrong = score_folder(sweep, "some_wrong", tasks, wrong={i for i in range(100) if i % 4 == 0})
    (sweep / "sweep.csv").write_text("cell,accuracy\nall_right,1.0\nsome_wrong,0.75\n")
    (sweep / "sweep_seeds.csv").write_text("topology,level,seeds,mean_accuracy,sd_accuracy\n"
                                           "single,all,3,0.625,0.0417\n")
    # A model's answer that tries to put markup into the page (shown as the cell's hover text).
    rows = (some_wrong / "results.jsonl").read_text().splitlines()
    row = json.loads(rows[0])
    row.update(predicted_call=HOSTILE)
    rows[0] = json.dumps(row)
    (some_wrong / "results.jsonl").write_text("\n".join(rows) + "\n")
    out = tmp / "out"
    assert cli_main(["report", str(gold), str(debate), str(sweep), "--out", str(out)]) == 0
    return out, tasks


def test_report_page_in_headless_chromium(report, tmp_path):
    out, tasks = report
    index = out / "index.html"
    dom = browse(index, tmp_path / "profile", "--dump-dom").stdout
    page = Page()
    page.feed(dom)
    assert "API-Bank benchmark report" in dom
    # The hostile answer is text in a hover title, not markup: no script element, no extra image.
    assert page.scripts == 0 and any(title.startswith(HOSTILE) for title in page.titles)
    for heading in ("Runs", "Failures by stage", "Paired comparisons", "Instances"):
        assert any(heading in h for h in page.headings), heading
    assert page.tables >= 6
    # the run given directly, then the two results folders found inside the sweep folder
    for name in ("gold_run", "debate", "sweep/all_right", "sweep/some_wrong"):
        assert f">{name}<" in dom
    assert "all_right,1.0" not in dom and ">0.75<" in dom  # sweep.csv is shown as a table
    assert ">0.0417<" in dom and "over the seeds" in dom  # and so is the per-seed table
    # Runs recorded with another selection are compared with the difference said in words, not hashes alone.
    assert "ran another selection of instances" in dom
    assert len(page.images) == 4  # accuracy intervals, failures by stage, accuracy against tokens, the frontier
    for src in page.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        width, height = png_size(base64.b64decode(src[len(prefix):]))
        assert width > 100 and height > 100
    pages = [link for link in page.links if link.startswith("instances/")]
    assert len(pages) == len(tasks) + 2  # `score` writes no traces; the gold run one per instance, the debate two
    debate_pages = [link for link in pages if link.startswith("instances/2/")]
    assert len(debate_pages) == 2


def test_instance_links_open_rendered_pages_with_every_agent_turn(report, tmp_path):
    out, _ = report
    page = Page()
    page.feed((out / "index.html").read_text(encoding="utf-8"))
    link = next(link for link in page.links if link.startswith("instances/2/"))
    dom = browse(out / unquote(link), tmp_path / "profile", "--dump-dom").stdout
    trace_link = next(href for href in re.findall(r'href="([^"]+)"', dom) if href.endswith(".json"))
    trace = json.loads((out / unquote(link)).parent.joinpath(unquote(trace_link)).resolve().read_text())
    assert len(trace["agents"]) == 4  # 2 debaters x (first answers + 1 round)
    for number, turn in enumerate(trace["agents"], start=1):
        assert f"turn {number}: debater #{turn['index']} (round {turn['round']}" in dom
    for text in ("dialogue", "USER:", "vote (reference rule)", "gold call:", trace["gold_call"].replace("'", "&#x27;"),
                 "scored call:", "stage:"):
        assert text in dom or html.unescape(text) in html.unescape(dom), text


def test_report_fits_a_1400_pixel_window(report, tmp_path):
    """No table pushes the page wider than the window: wide ones scroll inside it."""
    out, _ = report
    probe = out / "width_probe.html"
    script = "<script>document.title = String(document.documentElement.scrollWidth)</script></body>"
    probe.write_text((out / "index.html").read_text(encoding="utf-8").replace("</body>", script))
    dom = browse(probe, tmp_path / "profile", "--dump-dom", "--window-size=1400,900").stdout
    width = int(re.search(r"<title>(\d+)</title>", dom).group(1))
    assert width <= 1400


def test_report_screenshot_is_not_blank(report, tmp_path):
    from PIL import Image

    out, _ = report
    shot = tmp_path / "report.png"
    browse(out / "index.html", tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1800")
    with Image.open(shot) as image:
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, tables and plotted points, not an empty page


def test_runs_are_named_with_provenance_one_interval_per_number_and_unpaired_sets_marked(tmp_path):
    """Two runs of one setup over different instances: each named by what answered (its folder beside, as the
    names would clash), with its folder, start, commit, endpoint and version; tokens per correct answer has
    the same interval in the runs table and the per-role table (it had two bootstrap draws); the runs stand
    side by side in the figures and the frontier marked as unpaired sets."""
    from helpers import mixed  # the gold call for every other instance

    folders = {}
    with OpenAIStub(default=mixed) as stub:
        for name, limit in (("three", "3"), ("five", "5")):
            folders[name] = tmp_path / name
            done = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "stub", "--base-url",
                                   stub.url, "--limit", limit, "--no-cache", "--out-dir", str(folders[name])],
                                  cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
            assert done.returncode in (0, 1), done.stdout[-2000:]
    out = tmp_path / "report"
    assert cli_main(["report", str(folders["three"]), str(folders["five"]), "--out", str(out)]) == 0
    page = html.unescape((out / "index.html").read_text(encoding="utf-8"))
    assert re.search(r">single / stub[^<]* \(three\)<", page) and re.search(r">single / stub[^<]* \(five\)<", page)
    summary = json.loads((folders["three"] / "summary.json").read_text())
    config = summary["config"]
    for fact in (config["provenance"]["started_at"], config["git_revision"][:12], config["model"]["base_urls"][0],
                 config["packages"]["apibank-bench"], ">three<"):
        assert fact in page, fact
    per_correct = summary["tokens_per_correct"]
    low, high = per_correct["ci_95"]
    shown = f"{per_correct['tokens_per_correct']:.0f} [{low:.0f}, {'∞' if high is None else format(high, '.0f')}]"
    runs_section = page.split("<h2>Runs</h2>")[1].split("<h2>")[0]
    role_section = page.split("<h2>Accuracy against tokens</h2>")[1].split("<h2>")[0]
    assert shown in runs_section and shown in role_section  # the run's one role: one figure, one interval
    assert page.count("Unpaired: these runs hold different sets of instances") >= 3  # runs, accuracy, frontier
    assert re.search(r">single / stub[^<]* \(five\) \[instances B \(5\)\]<",
                     page.split("<h2>Accuracy–cost frontier</h2>")[1])


def test_the_frontier_says_its_accuracy_and_cost_are_epoch_0_s_when_runs_have_epochs(tmp_path, apibank_root):
    from apibank_bench.reports.html_sections import frontier_section
    from apibank_bench.reports.pairs import load_run

    tasks = eval_tasks(apibank_root)[:4]
    folders = [score_folder(tmp_path, name, tasks, wrong=wrong) for name, wrong in (("a", set()), ("b", {1}))]
    plain = frontier_section([load_run(folder) for folder in folders], 0, None)
    assert "accuracy of epoch 0" not in plain
    rows = (folders[1] / "results.jsonl").read_text().splitlines()
    (folders[1] / "results.jsonl").write_text("\n".join([*rows, json.dumps({**json.loads(rows[0]), "epoch": 1})]) + "\n")
    assert "accuracy of epoch 0" in frontier_section([load_run(folder) for folder in folders], 0, None)
