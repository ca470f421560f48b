"""`apibank-bench report DIR... --out REPORT_DIR`: one static HTML page about one or more runs.

A DIR is a results folder or any folder holding results folders (a sweep); results folders are
found by their summary.json. The page needs no server, network or JavaScript: figures are
embedded PNGs, and each run's traces are copied beside it so the per-instance links work offline.
Everything a model wrote is escaped before it reaches the page.
"""

from __future__ import annotations

import json
import shutil
from html import escape
from pathlib import Path
from urllib.parse import quote

from apibank_bench.reports.compare import compare_runs
from apibank_bench.reports.html_sections import (
    answered_by_table, api_table, comparisons_table, epochs_table, failures_table, frontier_section, image,
    instance_sets, instances_table, levels_table, modes_section, provenance_table, reasons_table, role_table,
    run_label, runs_table, sweep_tables, tagged_names, team_table, unpaired_note)
from apibank_bench.reports.modes import mode_comparisons
from apibank_bench.reports.pairs import Run, load_run
from apibank_bench.runs.pairing import first_epoch
from apibank_bench.runs.results import SUMMARY, TRACES, read_trace, trace_name
from apibank_bench.runs.summary import read_traces, summarize_rows

INSTANCE_PAGES = "instances"  #: the report's folder of rendered instance pages

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; } td.name, th.name { text-align: left; }
td.name { white-space: normal; overflow-wrap: anywhere; min-width: 8em; max-width: 24em; }
th { white-space: normal; } .scroll { overflow-x: auto; max-width: 100%; }
.note { background: #fff8e1; border-left: 4px solid #e0a800; padding: 0.3em 0.6em; }
td.ok { background: #dff0d8; } td.fail { background: #f8d7da; } td.err { background: #ddd; }
.warn { color: #a00; font-weight: bold; } img { max-width: 100%; display: block; margin: 0.5em 0 1.5em; }
"""


def find_runs(paths: list) -> list[Run]:
    """The results folders in `paths` (each a results folder or a folder of them), each named by what answered
    and its setup (`run_label`), with its folder beside it where two runs would share a name."""
    found: list[tuple[Path, str]] = []
    for root in map(Path, paths):
        if (root / SUMMARY).is_file():
            found.append((root, root.name))
            continue
        for summary in sorted(root.rglob(SUMMARY)):
            found.append((summary.parent, str(summary.parent.relative_to(root.parent))))
    if not found:
        raise FileNotFoundError(f"no results folder ({SUMMARY}) under {' '.join(map(str, paths))}")
    runs = [load_run(path, folder) for path, folder in found]
    labels = [run_label(run) for run in runs]
    names = [label if labels.count(label) == 1 else f"{label} ({folder})" for label, (_, folder) in zip(labels, found)]
    if len(set(names)) < len(names):
        names = [f"{index + 1}: {name}" for index, name in enumerate(names)]
    for run, name, (_, folder) in zip(runs, names, found):
        run.name, run.folder = name, folder
    return runs


def instance_pages(runs: list[Run], out: Path, trace_dirs: list[str]) -> dict[tuple[int, str], str]:
    """A rendered page per instance with a trace (`apibank-bench show` as HTML, epoch 0's), linking its raw
    trace; (run number, ID) -> the page, relative to the report."""
    from apibank_bench.reports.instance import Instance, sections, to_html

    pages = {}
    for number, (run, traces) in enumerate(zip(runs, trace_dirs)):
        folder = out / INSTANCE_PAGES / str(number + 1)
        if folder.exists():
            shutil.rmtree(folder)
        for row in first_epoch(run.rows).values():
            trace_file = run.path / TRACES / trace_name(row.id)
            if not trace_file.is_file():
                continue
            trace = read_trace(trace_file)
            name = trace_name(row.id).removesuffix(".json") + ".html"
            folder.mkdir(parents=True, exist_ok=True)
            raw = f"../../{traces}/{quote(trace_name(row.id))}"
            (folder / name).write_text(to_html(sections(Instance(row.id, row, trace, run.path)), "../../index.html",
                                               raw), encoding="utf-8")
            pages[(number, row.id)] = f"{INSTANCE_PAGES}/{number + 1}/{quote(name)}"
    return pages


def copy_traces(runs: list[Run], out: Path) -> list[str]:
    """Copy each run's traces to out/traces/<n>/ and return those folders relative to out."""
    folders = []
    for index, run in enumerate(runs, start=1):
        relative = f"{TRACES}/{index}"
        target = out / relative
        if target.exists():
            shutil.rmtree(target)
        source = run.path / TRACES
        if source.is_dir():
            shutil.copytree(source, target)
        folders.append(relative)
    return folders


def recorded_prices(runs: list[Run]):
    """The price table every run recorded (`--price`, `--price-file`), if they all recorded the same one."""
    from apibank_bench.runs.cost import price_table

    given = {json.dumps([(r.config.get("run") or {}).get(name) for name in ("price", "price_file")]) for r in runs}
    if len(given) != 1:
        return None
    prices, price_file = json.loads(given.pop())
    try:
        return price_table(prices or (), price_file)
    except ValueError:
        return None


def build_report(paths: list, out: Path, seed: int = 0, prices=None) -> Path:
    """The report's index.html; `prices` (a runs.cost.PriceTable) makes the frontier's cost money, else tokens."""
    from apibank_bench.reports import plots

    runs = find_runs(paths)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [summarize_rows(run.rows, read_traces(run.path / TRACES)) for run in runs]
    tags = instance_sets(runs)
    names = tagged_names([run.name for run in runs], tags)  # in the figures, where runs stand side by side
    sections = [
        ("Runs", runs_table(runs, summaries, tags) + unpaired_note(tags) + provenance_table(runs)
         + sweep_tables(paths)),
        ("Accuracy with 95% Wilson intervals", unpaired_note(tags)
         + image(plots.accuracy_intervals(names, summaries), "accuracy") + levels_table(runs, summaries)),
        ("Failures by stage and reason", failures_table(runs, summaries)
         + image(plots.failures_by_stage(names, summaries), "failures by stage") + reasons_table(runs, summaries)),
        ("Accuracy against tokens", image(plots.accuracy_vs_tokens(names, summaries), "accuracy against tokens")
         + role_table(runs, summaries)),
        ("Accuracy per gold API", api_table(runs, summaries)),
    ]
    if any(s.get("answered_by") for s in summaries):
        sections.insert(3, ("Which path answered: tool call or text", answered_by_table(runs, summaries)))
    if any("epochs" in s for s in summaries):
        sections.append(("Repeats: epochs, pass@k, majority of K, flip rate", epochs_table(runs, summaries)))
    if any(s.get("team") for s in summaries):
        sections.append(("Every agent scored: team, oracle and aggregation", team_table(runs, summaries)))
    modes = mode_comparisons(runs, seed) if len(runs) > 1 else []
    if modes:
        sections.append(("Chat against function calling: each model's two modes, paired", modes_section(modes)))
    if len(runs) > 1:
        sections.append(("Accuracy–cost frontier", frontier_section(runs, seed, prices or recorded_prices(runs), tags)))
        sections.append((f"Paired comparisons with {runs[0].name} (seed {seed})",
                         comparisons_table(compare_runs(runs, seed, force=True))))
    pages = instance_pages(runs, out, copy_traces(runs, out))
    sections.append(("Instances", "<p>Each cell opens the instance: the dialogue, every agent turn, the team's "
                                  "decision, the scored and the gold call.</p>" + instances_table(runs, pages)))
    body = "".join(f"<h2>{escape(title)}</h2>\n{content}\n" for title, content in sections)
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>API-Bank benchmark report</title>'
            f"<style>{STYLE}</style></head><body><h1>API-Bank benchmark report</h1>\n{body}</body></html>\n")
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
