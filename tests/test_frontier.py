"""The accuracy–cost frontier: a sweep over two role assignments x two team sizes marks its frontier and classes
the other cells, in sweep.md and in the HTML report (opened in Chromium); over results folders a configuration
the data cannot tell from the frontier is said to be so; cost with a price table, and its interval."""

from __future__ import annotations

import json
import math

import pytest

from apibank_bench import cli
from apibank_bench.reports import frontier
from apibank_bench.reports.compare import compare
from apibank_bench.reports.pairs import load_run
from apibank_bench.runs.cost import per_correct, price_table
from apibank_bench.runs.stats import ratio_bootstrap
from apibank_bench.reports.sweep_table import SWEEP_MD

from openai_stub import OpenAIStub, Reply
from helpers import bench, browse, EVAL_IDS, Page, task_of

IDS = EVAL_IDS[:6]
PRICES = ["--price", "A=1/1", "--price", "B=100/100"]


def by_model(right_on: dict[str, int]):
    """Model M answers the first `right_on[M]` instances of IDS right, the others wrong."""
    def respond(body: dict) -> Reply:
        task = task_of(body)
        if IDS.index(task.combined_id) < right_on.get(body["model"], 0):
            return Reply(text=f"[{task.gold_call[1:-1]}]")
        return Reply(text="[NoSuchApi(x='1')]")
    return respond


@pytest.fixture(scope="module")
def mixed_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("frontier") / "sweep"
    with OpenAIStub(default=by_model({"B": 6})) as a, OpenAIStub(default=by_model({"B": 6})) as b:
        code = cli.main(["sweep", "--out", str(out), "--model", "A", "--base-url", a.url, "--topology", "centralized",
                         "--team-size", "2,4", "--model-role", f"final=B@{b.url};-", "--only", *IDS, "--limit", "0", "--no-cache",
                         "--toolsearcher-scorer", "keyword", *PRICES])
        requests = {"A": len(a.chat_requests), "B": len(b.chat_requests)}
    return out, code, requests


def test_a_sweep_of_role_assignments_marks_the_frontier_and_classes_the_rest(mixed_sweep):
    out, code, requests = mixed_sweep
    assert code == 0
    # Per instance: n=2 all on A 2, n=4 all on A 4, n=2 with B 1 + 1, n=4 with B 3 + 1.
    assert requests == {"A": 6 * (2 + 4 + 1 + 3), "B": 6 * 2}
    cells = sorted(path.name for path in out.iterdir() if path.is_dir())
    assert cells == ["team_size=2,model_role=-", "team_size=2,model_role=final=B", "team_size=4,model_role=-",
                     "team_size=4,model_role=final=B"]
    summary = json.loads((out / "team_size=2,model_role=final=B" / "summary.json").read_text())
    assert summary["cost"]["per_correct"] == pytest.approx((18 * 1 + 18 * 100) / 1e6)
    markdown = (out / SWEEP_MD).read_text()
    section = markdown[markdown.index("## Accuracy–cost frontier"):]
    lines = {line.split(" | ")[1]: line for line in section.splitlines() if line.startswith("| ") and "team_size=" in line}
    assert len(lines) == 4
    assert "on the frontier" in lines["team_size=2, model_role=-"]
    assert "on the frontier" in lines["team_size=2, model_role=final=B"]
    assert "| dominated | team_size=2, model_role=- | significantly costlier" in lines["team_size=4, model_role=-"]
    assert "| dominated | team_size=2, model_role=final=B | significantly costlier" in \
        lines["team_size=4, model_role=final=B"]
    assert "100.0% [0.610, 1.000]" in lines["team_size=2, model_role=final=B"]  # Wilson interval, 6 of 6
    # The two neighbours on the frontier, paired as compare pairs them: 6 won of 6, exact McNemar p = 2 / 2^6.
    assert "accuracy +100.0% [+1.000, +1.000] paired on 6 instances, exact McNemar p = 0.0312" in markdown


def test_compare_and_the_gate_read_mixed_team_runs_unchanged(mixed_sweep):
    out, _, _ = mixed_sweep
    result = compare([out / "team_size=2,model_role=-", out / "team_size=2,model_role=final=B"])
    assert result["comparisons"][0]["overall"]["difference"] == 1.0 and not result["warnings"]
    from apibank_bench.reports.gate import judge

    verdict = judge(load_run(out / "team_size=2,model_role=final=B"), load_run(out / "team_size=2,model_role=-"))
    assert verdict.worse and "REGRESSION" in verdict.line


def test_the_report_draws_the_frontier_in_chromium(mixed_sweep, tmp_path):
    out, _, _ = mixed_sweep
    report = tmp_path / "report"
    assert cli.main(["report", str(out), "--out", str(report), *PRICES]) == 0
    dom = browse(report / "index.html", tmp_path / "profile", "--dump-dom").stdout
    page = Page()
    page.feed(dom)
    assert any("Accuracy–cost frontier" in heading for heading in page.headings)
    assert any(image.startswith("data:image/png;base64,") for image in page.images)
    section = dom[dom.index('<div id="frontier">'):]
    section = section[:section.index("</table>")]
    assert section.count(">on the frontier<") == 2 and section.count(">dominated<") == 2
    assert "Neighbours on the frontier" in dom


def test_a_point_within_noise_of_the_frontier_is_said_to_be_so(tmp_path):
    """Three single agents: A never right (cheap), B right on 2 of 6 and C on 1 of 6, at B's price: C is below B
    in point estimates but neither less accurate (1 discordant instance) nor costlier (the same) with significance."""
    with OpenAIStub(default=by_model({"B": 2, "C": 1})) as endpoint:
        for model in "ABC":
            bench(tmp_path / model, "--apibank-model", "A", "--apibank-base-url", endpoint.url, "--apibank-only",
                  *IDS, "--apibank-no-cache", "--apibank-toolsearcher-scorer", "keyword", "--apibank-model-role",
                  f"solver={model}")
    runs = [load_run(tmp_path / model) for model in "ABC"]
    result = frontier.frontier(runs, price_table(["A=1/1", "B=5/5", "C=5/5"]))
    status = {point.name: (point.status, point.against) for point in result["points"]}
    assert status == {"A": (frontier.ON, None), "B": (frontier.ON, None), "C": (frontier.INDISTINCT, "B")}
    assert result["frontier"] == ["A", "B"]
    # Without prices, tokens are the cost: every instance costs the same, and C sits on B's cost.
    tokens = frontier.frontier(runs)
    assert tokens["unit"] == "tokens" and {p.name: p.cost for p in tokens["points"]} == {"A": 18, "B": 18, "C": 18}
    assert [p.name for p in tokens["points"] if p.status == frontier.ON] == ["B"]


def test_cost_per_correct_upper_bound_is_unbounded_when_resamples_have_no_correct_answer():
    # One correct instance of 20: about 36 % of resamples hold none, so no upper bound is a number.
    low, high = ratio_bootstrap([1.0] * 20, [1] + [0] * 19)
    assert high is None and low > 0
    summary = per_correct([(f"i{i}", 1.0, i == 0) for i in range(20)])
    assert summary["per_correct"] == 20 and summary["upper_unbounded"] and summary["ci_95"][1] is None
    # Every instance right: a finite interval around the point.
    low, high = ratio_bootstrap([2.0, 4.0] * 10, [1] * 20)
    assert low <= 3 <= high and math.isfinite(high)


def test_a_price_file_names_its_date(tmp_path):
    undated = tmp_path / "undated.json"
    undated.write_text(json.dumps({"prices": {"A": [1, 2]}}))
    with pytest.raises(ValueError, match="names its date"):
        price_table(price_file=str(undated))
    dated = tmp_path / "prices.json"
    dated.write_text(json.dumps({"date": "2026-11-30", "prices": {"A": [1, 2], "B": [3, 4]}}))
    table = price_table(["B=5/6"], str(dated))
    assert table.date == "2026-11-30" and table.prices == {"A": (1.0, 2.0), "B": (5.0, 6.0)}  # --price wins
    assert table.cost("A", 1_000_000, 500_000) == 2.0 and table.cost("Z", 1, 1) is None


def test_runs_a_compare_would_refuse_are_not_judged_against_each_other(tmp_path):
    """A sweep may vary the ToolSearcher scorer: two such cells are not comparable (as `compare` and the gate
    say), so neither is called dominated by the other."""
    with OpenAIStub(default=by_model({"B": 2})) as endpoint:
        for model, scorer in (("A", "keyword"), ("B", "official")):
            bench(tmp_path / model, "--apibank-model", model, "--apibank-base-url", endpoint.url, "--apibank-only",
                  *IDS, "--apibank-no-cache", "--apibank-toolsearcher-scorer", scorer)
    runs = [load_run(tmp_path / model) for model in "AB"]
    point_a, point_b = (frontier.point_of(run, None, 0) for run in runs)
    dominated, why = frontier.judge(point_b, point_a, 0.05, 0)
    assert not dominated and why.startswith("not comparable with B: ") and "ToolSearcher scorer" in why


def test_the_sweeps_frontier_takes_prices_from_the_environment_as_the_cells_do(mixed_sweep, monkeypatch, capsys):
    """`APIBANK_PRICE` prices the cells' costs (they resolve the environment); the sweep's frontier table is priced
    with the same table, not in tokens."""
    out, _, _ = mixed_sweep
    monkeypatch.setenv("APIBANK_PRICE", "A=1/1,B=100/100")
    code = cli.main(["sweep", "--out", str(out), "--model", "A", "--base-url", "http://127.0.0.1:9", "--topology",
                     "centralized", "--team-size", "2,4", "--model-role", "final=B@http://127.0.0.1:9;-", "--only",
                     *IDS, "--limit", "0", "--no-cache", "--toolsearcher-scorer", "keyword", "--tabulate"])
    assert code == 0, capsys.readouterr()
    markdown = (out / SWEEP_MD).read_text()
    assert "Cost: price-table money per instance" in markdown
