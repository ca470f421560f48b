"""`compare` on results folders built with the real `apibank-bench score`, against scipy and numpy directly."""

import json

import numpy as np
import pytest
from results_folders import eval_tasks, score_folder
from scipy import stats as sp

from apibank_bench.cli import main as cli_main
from apibank_bench.reports.compare import compare
from apibank_bench.reports.pairs import RunMismatch
from apibank_bench.runs.results import read_jsonl

WRONG_A = {i for i in range(100) if i % 9 == 0}
WRONG_B = {i for i in range(100) if i % 5 == 0 or i in (3, 4)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, apibank_root):
    tmp = tmp_path_factory.mktemp("compare")
    tasks = eval_tasks(apibank_root)
    assert len(tasks) == 100
    return tasks, score_folder(tmp, "run_a", tasks, WRONG_A), score_folder(tmp, "run_b", tasks, WRONG_B)


def _direct_bootstrap(a, o, seed):
    a, o = np.array(a, float), np.array(o, float)
    draws = np.random.default_rng(seed).integers(0, len(a), size=(10_000, len(a)))
    return np.percentile(o[draws].mean(axis=1) - a[draws].mean(axis=1), [2.5, 97.5])


def test_overall_matches_scipy_and_numpy_on_the_same_table(runs):
    tasks, run_a, run_b = runs
    result = compare([run_a, run_b], seed=5)
    overall = result["comparisons"][0]["overall"]
    a = [i not in WRONG_A for i in range(100)]
    o = [i not in WRONG_B for i in range(100)]
    b = sum(x and not y for x, y in zip(a, o))
    c = sum(y and not x for x, y in zip(a, o))
    assert (overall["baseline_only_correct"], overall["run_only_correct"]) == (b, c) == (19, 9)
    assert overall["mcnemar_p"] == pytest.approx(sp.binomtest(c, b + c, 0.5).pvalue, rel=1e-12)
    assert overall["ci_95"] == pytest.approx(list(_direct_bootstrap(a, o, 5)), abs=1e-12)
    assert overall["accuracy_baseline"] == 1 - len(WRONG_A) / 100
    assert overall["accuracy_run"] == 1 - len(WRONG_B) / 100
    assert overall["difference"] == pytest.approx((c - b) / 100) == pytest.approx(-0.10)  # the run's minus the baseline's
    ids = [task.combined_id for task in tasks]
    assert overall["won"] == [ids[i] for i in sorted(WRONG_A - WRONG_B)]
    assert overall["lost"] == [ids[i] for i in sorted(WRONG_B - WRONG_A)]


def test_per_level_pairs_only_that_levels_instances(runs):
    tasks, run_a, run_b = runs
    by_level = compare([run_a, run_b])["comparisons"][0]["by_level"]
    assert {level: row["n"] for level, row in by_level.items()} == {"1": 33, "2": 33, "3": 34}
    level3 = [i for i, task in enumerate(tasks) if task.level == "3"]
    a = [i not in WRONG_A for i in level3]
    o = [i not in WRONG_B for i in level3]
    b = sum(x and not y for x, y in zip(a, o))
    c = sum(y and not x for x, y in zip(a, o))
    assert by_level["3"]["mcnemar_p"] == pytest.approx(sp.binomtest(c, b + c, 0.5).pvalue, rel=1e-12)
    assert by_level["3"]["ci_95"] == pytest.approx(list(_direct_bootstrap(a, o, 0)), abs=1e-12)


def test_a_run_against_itself_shows_no_difference(runs, tmp_path):
    tasks, run_a, _ = runs
    overall = compare([run_a, run_a])["comparisons"][0]["overall"]
    assert (overall["difference"], overall["ci_95"], overall["mcnemar_p"]) == (0.0, [0.0, 0.0], 1.0)
    assert (overall["won"], overall["lost"], overall["n"]) == ([], [], 100)
    assert overall["accuracy_baseline"] == overall["accuracy_run"] == 1 - len(WRONG_A) / 100
    # ...and the same run with one of its wrong instances put right differs by exactly +1 point, that way round.
    fixed = score_folder(tmp_path, "fixed", tasks, WRONG_A - {9})
    overall = compare([run_a, fixed])["comparisons"][0]["overall"]
    assert overall["difference"] == pytest.approx(0.01) and overall["won"] == [tasks[9].combined_id]
    assert overall["lost"] == [] and 0.0 <= overall["ci_95"][0] <= overall["ci_95"][1] <= 0.03
    assert overall["accuracy_run"] - overall["accuracy_baseline"] == pytest.approx(0.01)


def test_error_rows_are_left_out_of_the_pairing_and_counted(runs, tmp_path):
    tasks, run_a, run_b = runs
    copy = tmp_path / "run_c"
    copy.mkdir()
    rows = read_jsonl(run_b / "results.jsonl")
    for row in rows[:4]:  # instances 0 and 3 are wrong in B, 1 and 2 right: none may count as an answer
        row.update(stage="error", correct=row["correct"], error="endpoint timed out")
    (copy / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (copy / "summary.json").write_text((run_b / "summary.json").read_text(), encoding="utf-8")
    comp = compare([run_a, copy])["comparisons"][0]
    assert comp["errors_excluded"] == {"baseline": 0, "run": 4}
    assert (comp["shared"], comp["paired"]) == (100, 96)
    assert tasks[3].combined_id not in comp["overall"]["lost"]  # wrong in B, but B's row is an error now
    assert (comp["overall"]["n"], len(comp["overall"]["lost"])) == (96, 18)


def _with_config(tmp_path, source, name, config, keep=None, selection=None, only_level=None):
    """A copy of a results folder (its first `keep` rows, of one level) with another recorded config."""
    target = tmp_path / name
    target.mkdir()
    rows = [row for row in read_jsonl(source / "results.jsonl") if only_level in (None, row["level"])][:keep]
    (target / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    summary = json.loads((source / "summary.json").read_text())
    summary["config"] = config
    if selection:
        summary["selection"] = selection
    (target / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return target


def test_refuses_runs_with_another_scorer_or_data_in_words_unless_forced(runs, tmp_path, capsys):
    _, run_a, run_b = runs
    base = {"run": {"level": "all", "limit": None, "offset": 0, "only": [], "shard": None,
                    "toolsearcher_scorer": "official"}}
    a = _with_config(tmp_path, run_a, "a", base)
    b = _with_config(tmp_path, run_b, "b", {"run": {**base["run"], "toolsearcher_scorer": "keyword"}})
    level3 = _with_config(tmp_path, run_b, "level3", {"run": {**base["run"], "level": "3"}})
    same = _with_config(tmp_path, run_b, "same", {"run": dict(base["run"]), "data_hash": "x"})
    with pytest.raises(RunMismatch, match="ToolSearcher scorer keyword vs official"):
        compare([a, b])
    with pytest.raises(RunMismatch, match=r"manifest level 3 \(the Level-3 curated list\) vs level all"):
        compare([a, level3])
    assert compare([a, same])["warnings"] == []  # a key only one run records is not a difference
    other_data = _with_config(tmp_path, run_b, "other_data", {"run": dict(base["run"]), "data_hash": "y"})
    with pytest.raises(RunMismatch, match="data lock y vs x"):
        compare([same, other_data])

    assert cli_main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ToolSearcher scorer keyword vs official" in err and "--force" in err
    assert "sha256" not in err and '{"' not in err  # words, not a dump of recorded values

    assert cli_main(["compare", str(a), str(b), "--force", "--json"]) == 0
    captured = capsys.readouterr()
    assert "WARNING" in captured.err
    assert json.loads(captured.out)["warnings"] == compare([a, b], force=True)["warnings"] != []


def test_runs_with_other_selections_are_paired_on_what_they_share_with_a_note(runs, tmp_path, capsys):
    tasks, run_a, run_b = runs
    base = {"run": {"level": "all", "limit": 10, "offset": 0, "only": [], "shard": None,
                    "toolsearcher_scorer": None}}
    ten = _with_config(tmp_path, run_a, "ten", base, keep=10)
    six = _with_config(tmp_path, run_b, "six", {"run": {**base["run"], "limit": 6}}, keep=6)
    full = _with_config(tmp_path, run_a, "full", {"run": {**base["run"], "limit": None}})
    level3 = _with_config(tmp_path, run_b, "k_level3", {"run": {**base["run"], "limit": None}},
                          selection={"pytest": {"-k": "level3"}}, only_level="3")
    comp = compare([ten, six])["comparisons"][0]
    assert comp["notes"] == ["limit 6 vs 10"] and comp["refused"] == []
    assert (comp["shared"], comp["paired"], comp["only_in_baseline"]) == (6, 6, 4)
    assert comp["overall"]["n"] == 6
    comp = compare([full, level3])["comparisons"][0]
    assert comp["notes"] == ["pytest -k level3 vs none"] and comp["shared"] == 34
    assert cli_main(["compare", str(ten), str(six)]) == 0
    assert "note: the selection differs (limit 6 vs 10); paired on the 6 instances both hold" in capsys.readouterr().out


def test_fail_if_worse_exits_1_only_on_a_significant_loss(runs, tmp_path, capsys):
    tasks, run_a, _ = runs
    worse = score_folder(tmp_path, "worse", tasks, set(range(0, 100, 4)))  # 25 of the 100 wrong, none in run_a's
    assert cli_main(["compare", str(run_a), str(worse), "--fail-if-worse", "0.05"]) == 1
    assert "worse is significantly worse than run_a" in capsys.readouterr().err
    assert cli_main(["compare", str(worse), str(run_a), "--fail-if-worse", "0.05"]) == 0  # better, not worse
    assert cli_main(["compare", str(run_a), str(worse)]) == 0  # no gate asked for: a comparison is not a failure
    close = score_folder(tmp_path, "close", tasks, set(range(0, 100, 9)) | {1})  # one instance worse: noise
    assert cli_main(["compare", str(run_a), str(close), "--fail-if-worse", "0.05"]) == 0
    overall = compare([run_a, close])["comparisons"][0]["overall"]
    assert overall["difference"] < 0 and overall["mcnemar_p"] > 0.05


def test_cli_table_and_json(runs, capsys):
    _, run_a, run_b = runs
    assert cli_main(["compare", str(run_a), str(run_b), "--json", "--seed", "5"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(compare([run_a, run_b], seed=5)))
    assert cli_main(["compare", str(run_a), str(run_b)]) == 0
    table = capsys.readouterr().out
    assert "run_b vs baseline run_a" in table and "overall" in table and "McNemar p" in table


def _exact_power(n: int, psi: float, delta: float, alpha: float = 0.05) -> float:
    """The exact McNemar test's power, from scipy alone (see test_stats)."""
    power = 0.0
    for d in range(1, n + 1):
        lost = np.arange(d + 1)
        p_values = np.minimum(1.0, 2 * np.minimum(sp.binom.cdf(lost, d, 0.5), sp.binom.sf(lost - 1, d, 0.5)))
        power += sp.binom.pmf(d, n, psi) * sp.binom.pmf(lost[p_values < alpha], d, (psi + delta) / (2 * psi)).sum()
    return power


def test_the_minimum_detectable_difference_comes_from_the_observed_discordance(runs):
    from apibank_bench.reports.compare import format_table

    tasks, run_a, run_b = runs
    result = compare([run_a, run_b])
    overall = result["comparisons"][0]["overall"]
    delta, psi, n = overall["min_detectable_difference"], (19 + 9) / 100, 100
    # The smallest difference the exact test detects with 80 % power, never more than the discordance.
    assert delta <= psi and _exact_power(n, psi, delta) >= 0.8 > _exact_power(n, psi, 0.99 * delta)
    assert f"{delta:.1%}" in format_table(result).splitlines()[5] and "MDD 80%" in format_table(result)


def test_with_few_discordant_pairs_it_says_no_difference_is_detectable(runs, tmp_path):
    from apibank_bench.reports.compare import format_table

    tasks, run_a, _ = runs
    close = score_folder(tmp_path, "close3", tasks, WRONG_A | {1, 2, 5})  # 3 discordant pairs of 100
    result = compare([run_a, close])
    overall = result["comparisons"][0]["overall"]
    assert (overall["baseline_only_correct"], overall["run_only_correct"]) == (3, 0)
    assert overall["min_detectable_difference"] is None  # not 4.8 %: a difference can be 3 points at most
    assert _exact_power(100, 0.03, 0.03) < 0.1
    table = format_table(result)
    overall_line = next(line for line in table.splitlines() if line.startswith("overall"))
    assert overall_line.split()[-1] == "none" and "none: no difference is detectable at 80 % power" in table
    assert " - " not in overall_line and not overall_line.endswith("-")  # `-` no longer means anything here


def test_runs_of_several_epochs_pair_on_epoch_0_and_show_their_flip_rate(tmp_path):
    from apibank_bench.reports.compare import compare_runs
    from apibank_bench.reports.pairs import Run

    from apibank_bench.runs.row import ResultRow
    from apibank_bench.scoring.stage import Stage

    def rows(outcomes: dict[str, tuple]) -> list[ResultRow]:
        return [ResultRow(i, e, "1", bool(hit), Stage.SCORE, model_calls=0)
                for i, hits in outcomes.items() for e, hit in enumerate(hits)]

    single = Run("single", tmp_path, rows({"a": (1,), "b": (0,), "c": (1,)}), {})
    repeated = Run("repeated", tmp_path, rows({"a": (0, 1, 1), "b": (0, 0, 0), "c": (1, 1, 1)}), {})
    result = compare_runs([single, repeated])
    overall = result["comparisons"][0]["overall"]
    assert overall["n"] == 3 and overall["lost"] == ["a"]  # epoch 0 of each instance: a lost, b and c equal
    facts = result["runs"][1]
    assert (facts["epochs"], facts["instances"]) == (3, 3)
    assert facts["flip_rate"] == pytest.approx(1 / 3) and facts["mean_accuracy_over_epochs"] == pytest.approx(5 / 9)
    assert "epochs" not in result["runs"][0]


def test_optimize_final_pairs_as_compare_does_error_rows_left_out(tmp_path):
    """The issue's case: the seed run's 3 error rows were counted as wrong answers by final.json
    ("improved 3, p 0.25") where `compare` left them out (97 paired, p 1.0)."""
    from apibank_bench.optimize.final import compare as final_compare
    from apibank_bench.reports.compare import compare_runs
    from apibank_bench.reports.pairs import Run
    from apibank_bench.runs.row import ResultRow
    from apibank_bench.scoring.stage import Stage

    ids = [f"level-1::t{i}" for i in range(100)]
    seed = [ResultRow(i, 0, "1", k >= 3, Stage.ERROR if k < 3 else Stage.SCORE, model_calls=1)
            for k, i in enumerate(ids)]
    optimized = [ResultRow(i, 0, "1", k != 50, Stage.SCORE, model_calls=1) for k, i in enumerate(ids)]
    final = final_compare(seed, optimized)
    comp = compare_runs([Run("seed", tmp_path, seed, {}), Run("optimized", tmp_path, optimized, {})])
    overall = comp["comparisons"][0]["overall"]
    assert final["paired_test"]["p_value"] == overall["mcnemar_p"] == 1.0
    assert final["paired_test"]["paired"] == overall["n"] == 97
    assert final["paired_test"]["errors_excluded"] == comp["comparisons"][0]["errors_excluded"] == \
        {"baseline": 3, "run": 0}
    assert (final["improved"], final["regressed"]) == (overall["won"], overall["lost"]) == ([], [ids[50]])


def test_every_paired_test_goes_through_the_one_pairing():
    """The paired statistics are called in runs.stats (their definitions) and runs.pairing only: any
    other caller would be a second pairing."""
    import re

    from apibank_bench.core.paths import PROJECT_ROOT

    package = PROJECT_ROOT / "apibank_bench"
    calls = re.compile(r"\b(mcnemar_exact|discordant|paired_bootstrap|min_detectable_difference)\(")
    callers = {path.relative_to(package).as_posix() for path in package.rglob("*.py")
               if calls.search(re.sub(r"def \w+\(", "", path.read_text(encoding="utf-8")))}
    assert callers == {"runs/stats.py", "runs/pairing.py"}


def test_a_runs_mode_is_read_from_what_ran_without_loading_the_topologies():
    """summary.json records the topology and agent kind that ran (`ran`: an alias's target), so compare's pairing
    of modes reads it instead of importing the topologies; a folder written before resolves the alias."""
    import subprocess
    import sys
    from pathlib import Path

    from apibank_bench.reports.modes import mode_of
    from apibank_bench.reports.pairs import Run

    alias = {"topology": "agents_sdk", "agent_kind": "chat"}
    assert mode_of(Run("new", Path("."), [], {"config": {"run": alias, "ran": {"topology": "single",
                                                                             "agent_kind": "sdk"}}})) == "sdk"
    assert mode_of(Run("old", Path("."), [], {"config": {"run": alias}})) == "sdk"  # resolved by the spec
    code = ("import sys\nfrom pathlib import Path\nfrom apibank_bench.reports.pairs import Run\n"
            "from apibank_bench.reports.modes import mode_of\n"
            "run = Run('r', Path('.'), [], {'config': {'run': {'topology': 'x'}, 'ran': {'topology': 'single', "
            "'agent_kind': 'chat'}}})\nassert mode_of(run) == 'chat'\n"
            "print(any(name.startswith('apibank_bench.agents') for name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]
