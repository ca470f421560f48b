"""`report`: built from real results folders (and a sweep folder of them), opened in headless Chromium."""

import base64
import json
import os
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from results_folders import eval_tasks, score_folder

from apibank_bench.cli import main as cli_main
from apibank_bench.core.paths import PROJECT_ROOT

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = '"><script>document.title="owned"</script><img src=x onerror=console.log(2)>'


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


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(tmp_path_factory, apibank_root):
    """A gold run over the eval set (with traces), and a sweep folder of two `score` folders."""
    tmp = tmp_path_factory.mktemp("report")
    tasks = eval_tasks(apibank_root)
    gold = tmp / "gold_run"
    subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "gold", "--limit", "0",
                    "--out-dir", str(gold)], cwd=PROJECT_ROOT, check=True, capture_output=True,
                   env={**os.environ, "APIBANK_ROOT": str(apibank_root)})
    sweep = tmp / "sweep"
    sweep.mkdir()
    score_folder(sweep, "all_right", tasks, wrong=set())
    some_wrong = score_folder(sweep, "some_wrong", tasks, wrong={i for i in range(100) if i % 4 == 0})
    (sweep / "sweep.csv").write_text("cell,accuracy\nall_right,1.0\nsome_wrong,0.75\n")
    # A model's answer that tries to put markup into the page (shown as the cell's hover text).
    rows = (some_wrong / "results.jsonl").read_text().splitlines()
    row = json.loads(rows[0])
    row.update(predicted_call=HOSTILE)
    rows[0] = json.dumps(row)
    (some_wrong / "results.jsonl").write_text("\n".join(rows) + "\n")
    out = tmp / "out"
    assert cli_main(["report", str(gold), str(sweep), "--out", str(out)]) == 0
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
    for name in ("gold_run", "sweep/all_right", "sweep/some_wrong"):
        assert f">{name}<" in dom
    assert "all_right,1.0" not in dom and ">0.75<" in dom  # sweep.csv is shown as a table
    assert len(page.images) == 3  # accuracy intervals, failures by stage, accuracy against tokens
    for src in page.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        width, height = png_size(base64.b64decode(src[len(prefix):]))
        assert width > 100 and height > 100
    traces = [link for link in page.links if link.startswith("traces/")]
    assert len(traces) == len(tasks)  # `score` writes no traces; the gold run writes one per instance
    for link in traces:
        assert json.loads((out / link).read_text())["id"] in {task.combined_id for task in tasks}


def test_report_screenshot_is_not_blank(report, tmp_path):
    from PIL import Image

    out, _ = report
    shot = tmp_path / "report.png"
    browse(out / "index.html", tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1800")
    with Image.open(shot) as image:
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, tables and plotted points, not an empty page
