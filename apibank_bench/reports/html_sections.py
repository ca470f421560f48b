"""The sections of the report's page (reports.html): each a function of the runs (and their summaries) that
returns the section's HTML, the one table builder they share, and a run's setup in words (`run_label`).

Cells are text, escaped here: everything a model wrote reaches the page as text, never as markup.
"""

from __future__ import annotations

import base64
import csv
from html import escape
from pathlib import Path
from typing import Any

from apibank_bench.reports.compare import MDD_NOTE, format_mdd, pairing_words
from apibank_bench.reports.modes import mode_of
from apibank_bench.reports.pairs import Run, format_p
from apibank_bench.reports.sweep_table import SEEDS_CSV, SWEEP_CSV
from apibank_bench.runs.epochs import correct_epochs
from apibank_bench.runs.pairing import first_epoch
from apibank_bench.runs.summary import counts_text, gold_api_name, interval_text
from apibank_bench.runs.team import protocol_words
from apibank_bench.scoring.stage import Stage


def _fmt(value, spec: str = ".1%") -> str:
    return "—" if value is None else format(value, spec)


def _interval(part: dict) -> str:
    low, high = part["wilson_95"]
    return f"[{low:.3f}, {high:.3f}]"


def _table(header: list[str], rows: list[list], name_columns: int = 1) -> str:
    """An HTML table; cells are text, or (text, css class, href, hover title) tuples; all escaped."""
    def cell(value, column, tag="td") -> str:
        text, css, href, title = (*(value if isinstance(value, tuple) else (value,)), None, None, None)[:4]
        css = css or ("name" if column < name_columns else None)
        body = escape(str(text))
        if href:
            body = f'<a href="{escape(href)}">{body}</a>'
        attrs = (f' class="{css}"' if css else "") + (f' title="{escape(title)}"' if title else "")
        return f"<{tag}{attrs}>{body}</{tag}>"

    head = "".join(cell(text, column, "th") for column, text in enumerate(header))
    body = "".join("<tr>" + "".join(cell(value, column) for column, value in enumerate(row)) + "</tr>" for row in rows)
    # Too wide for the window (many runs side by side), a table scrolls inside the page.
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def image(png: bytes | None, alt: str) -> str:
    if png is None:
        return f"<p>{escape(alt)}: no run recorded token usage.</p>"
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def run_label(run: Run) -> str:
    """The run's setup in words: what answered (with a team protocol other than the topology's graph
    named), and its epochs when it solved each instance several times."""
    setup = run.config.get("run") or {}
    epochs = setup.get("epochs") or 1
    return " / ".join([_answered_by(run), *([f"{epochs} epochs"] if epochs > 1 else [])])


def _answered_by(run: Run) -> str:
    config = run.config
    setup = config.get("run") or {}
    model = (config.get("model") or {}).get("model") or setup.get("model")
    if model == "gold":
        return "gold calls (harness self-check)"
    if "source" in config:
        return f"scored from {Path(str(config['source'])).name}"
    topology = setup.get("topology")
    from apibank_bench.agents.topologies import is_team

    team = f"team of {setup['team_size']}" if is_team(topology) and setup.get("team_size") else None
    return " / ".join(str(part) for part in (topology, *_kind_words(run), protocol_words(setup), model, team,
                                             setup.get("message_format")) if part)


def _kind_words(run: Run) -> list[str]:
    """An sdk run's mode (the chat and sdk runs of one setup differ in nothing else the name shows), and its
    `--tool-parse` and `--history` where not the defaults; nothing for a chat run or a topology named for it."""
    setup = run.config.get("run") or {}
    if mode_of(run) != "sdk":
        return []
    words = [] if "sdk" in str(setup.get("topology")) else ["sdk"]
    if setup.get("tool_parse", "both") != "both":
        words.append(f"tool parse {setup['tool_parse']}")
    if setup.get("history", "text") != "text":
        words.append(f"history {setup['history']}")
    return words


def _correct(part: dict) -> str:
    """Correct answers, of how many attempts when the instances were solved in several epochs."""
    attempts = part.get("attempts", part["total"])
    return str(part["correct"]) if attempts == part["total"] else f"{part['correct']} of {attempts} attempts"


def _flags(part: dict) -> tuple[str, str | None]:
    return ", ".join(part["flags"]), "warn" if part["flags"] else None


def _per_correct(part: dict) -> str:
    """Tokens per correct answer with its bootstrap interval ("—" when nothing was right or usage is unknown;
    an unbounded upper end is ∞)."""
    if part.get("tokens_per_correct") is None or not part.get("tokens"):
        return "—"
    return f"{part['tokens_per_correct']:.0f} {interval_text(part['ci_95'])}"


def runs_table(runs: list[Run], summaries: list[dict], tags: dict[str, str] | None = None) -> str:
    tags = tags or {}
    header = ["run", "setup", "n (instances)", "correct", "errors", "accuracy", "95% Wilson (eff. n with epochs)",
              "acc. completed",
              "tokens / inst.", "tokens / correct [95%]", "usage missing", "wall time (s)", "flags"]
    rows = [[run.name, run_label(run), f"{s['total']} ({tags[run.name]})" if run.name in tags else s["total"], _correct(s), s["errors"], _fmt(s["accuracy"]), _interval(s),
             _fmt(s["accuracy_completed"]), _fmt(s["tokens_per_instance"]["total_per_instance"], ".0f"),
             _per_correct(s["tokens_per_correct"]),
             s["tokens_per_instance"]["instances_missing_usage"], _fmt(run.summary.get("wall_time_s"), ".1f"),
             _flags(s)] for run, s in zip(runs, summaries)]
    return _table(header, rows, name_columns=2)


def provenance_table(runs: list[Run]) -> str:
    """Where each run's numbers came from: its folder, when it started, the code's commit, the endpoint, the
    package's version (what summary.json recorded; "—" for a folder scored from saved answers)."""
    rows = []
    for run in runs:
        config = run.config
        model = config.get("model") or {}
        commit = config.get("git_revision")
        rows.append([run.name, (run.folder or run.path.name, None, None, str(run.path.resolve())),
                     (config.get("provenance") or {}).get("started_at") or "—",
                     commit[:12] + ("+dirty" if commit.endswith("+dirty") else "") if commit else "—",
                     ", ".join(model.get("base_urls") or []) or "—",
                     (config.get("packages") or {}).get("apibank-bench") or "—"])
    return _table(["run", "folder", "started (UTC)", "commit", "endpoint", "apibank-bench"], rows, 2)


def instance_sets(runs: list[Run]) -> dict[str, str]:
    """Runs over different sets of instances, each tagged with its set ("instances B (34)"); empty when every
    run holds the same instances (epoch 0's rows, as the pairing takes them)."""
    sets = [frozenset(first_epoch(run.rows)) for run in runs]
    distinct = list(dict.fromkeys(sets))
    if len(distinct) <= 1:
        return {}
    return {run.name: f"instances {chr(ord('A') + distinct.index(held))} ({len(held)})"
            for run, held in zip(runs, sets)}


def unpaired_note(tags: dict[str, str]) -> str:
    """Said wherever runs over different instance sets stand side by side."""
    if not tags:
        return ""
    groups: dict[str, list[str]] = {}
    for name, tag in tags.items():
        groups.setdefault(tag, []).append(name)
    listed = "; ".join(f"{tag}: {', '.join(names)}" for tag, names in groups.items())
    return (f'<p class="note">Unpaired: these runs hold different sets of instances ({escape(listed)}). Side by side '
            "their accuracies and costs are over different instances, so their differences are not paired "
            "comparisons; the paired comparisons below use the instances both runs hold.</p>")


def tagged_names(names: list[str], tags: dict[str, str]) -> list[str]:
    return [f"{name} [{tags[name]}]" if name in tags else name for name in names]


def epochs_table(runs: list[Run], summaries: list[dict]) -> str:
    """Runs of several epochs: mean accuracy with its clustered interval, pass@k, majority-of-K, flip rate."""
    ks = sorted({k for s in summaries if "epochs" in s for k in s["epochs"]["pass_at_k"]}, key=int)
    rows = []
    for run, s in zip(runs, summaries):
        if "epochs" not in s:
            continue
        for level, part in [*((level, p["epochs"]) for level, p in s["by_level"].items()), ("overall", s["epochs"])]:
            low, high = part["clustered_95"]
            rows.append([run.name, level, part["instances"], part["epochs"], _fmt(part["mean_accuracy"]),
                         f"[{low:.3f}, {high:.3f}]", *(_fmt(part["pass_at_k"].get(k)) for k in ks),
                         _fmt(part["majority_accuracy"]), _fmt(part["flip_rate"]),
                         _fmt(part["sd_over_epochs"])])
    header = ["run", "level", "instances", "epochs", "mean accuracy", "95% clustered by instance",
              *(f"pass@{k}" for k in ks), "majority of K", "flip rate", "sd over epochs"]
    return _table(header, rows, 2)


def team_table(runs: list[Run], summaries: list[dict]) -> str:
    """Team runs with every agent scored: the team against its best member, per role and round."""
    rows, roles = [], []
    for run, s in zip(runs, summaries):
        team = s.get("team")
        if not team:
            continue
        margin = team.get("vote_margin", {}).get("mean")
        rows.append([run.name, team["instances"], _fmt(team["team_accuracy"]), _fmt(team["oracle_accuracy"]),
                     team["lost_by_aggregation"], team["fixed_by_aggregation"], _fmt(margin, ".2f")])
        roles += [[run.name, f"role {role}", part["turns"], _fmt(part["accuracy"])]
                  for role, part in team["by_role"].items()]
        roles += [[run.name, f"round {key}", part["turns"], _fmt(part["accuracy"])]
                  for key, part in team["by_round"].items()]
    header = ["run", "instances", "team accuracy", "oracle accuracy (some agent's final call right)",
              "lost by aggregation", "fixed by aggregation", "mean vote margin"]
    return _table(header, rows) + _table(["run", "agents", "scored turns", "accuracy"], roles, 2)


def levels_table(runs: list[Run], summaries: list[dict]) -> str:
    header = ["run", "level", "n", "correct", "errors", "accuracy", "95% Wilson", "acc. completed", "flags"]
    rows = [[run.name, level, p["total"], _correct(p), p["errors"], _fmt(p["accuracy"]), _interval(p),
             _fmt(p["accuracy_completed"]), _flags(p)]
            for run, s in zip(runs, summaries) for level, p in s["by_level"].items()]
    return _table(header, rows, name_columns=2)


def failures_table(runs: list[Run], summaries: list[dict]) -> str:
    rows = [[run.name, *(s["failures_by_stage"].get(stage, 0) for stage in Stage)] for run, s in zip(runs, summaries)]
    return _table(["run", *Stage], rows)


def reasons_table(runs: list[Run], summaries: list[dict]) -> str:
    """Failures per reason code (scoring.stage.Reason), a row per code, a column per run."""
    codes = sorted({code for s in summaries for code in s.get("failures_by_reason") or {}})
    rows = [[code, *((s.get("failures_by_reason") or {}).get(code, 0) for s in summaries)] for code in codes]
    return _table(["reason", *(run.name for run in runs)], rows)


def answered_by_table(runs: list[Run], summaries: list[dict]) -> str:
    """Which path each run's answers came through (scoring.answered_by.AnsweredBy), a row per path, a column per run;
    a run no answer of which came through a tool call is marked."""
    parts = [(s.get("answered_by") or {}).get("rows") or {} for s in summaries]
    paths = list(dict.fromkeys(path for part in parts for path in part))
    rows = [[path, *(part.get(path, 0) if part else "—" for part in parts)] for path in paths]
    no_tools = [run.name for run, s in zip(runs, summaries)
                if s.get("answered_by") and not s["answered_by"].get("tool_calls")]
    note = "".join(f'<p class="note">{escape(name)}: no answer came through a tool call (all read from text)</p>'
                   for name in no_tools)
    return note + _table(["answered by", *(run.name for run in runs)], rows)


def modes_section(comparisons: list[dict]) -> str:
    """The model x mode table (reports.modes): each chat run against the sdk run of its setup."""
    from apibank_bench.reports import modes

    notes = "".join(f'<p class="note">{escape(comp["sdk"])}: {escape(modes.NO_TOOL_CALLS)}</p>'
                    for comp in comparisons if modes.no_tool_calls(comp))
    return (notes + _table(modes.HEADER, modes.rows(comparisons), name_columns=4)
            + "<p>Paired on the instances both runs answered (epoch 0); the difference is the sdk run's accuracy "
              "minus the chat run's, with a paired-bootstrap interval and the exact McNemar test.</p>")


def api_table(runs: list[Run], summaries: list[dict]) -> str:
    apis = sorted({api for s in summaries for api in s["by_api"]})
    rows = [[api, *(counts_text(s["by_api"][api]) if api in s["by_api"] else "—"
                    for s in summaries)] for api in apis]
    return _table(["gold API", *(run.name for run in runs)], rows)


def role_table(runs: list[Run], summaries: list[dict]) -> str:
    rows = [[run.name, role, counts["turns"], counts["prompt_tokens"], counts["completion_tokens"],
             _per_correct(s.get("tokens_per_correct_by_role", {}).get(role, {})),
             (counts["turns_missing_usage"], "warn" if counts["turns_missing_usage"] else None)]
            for run, s in zip(runs, summaries) for role, counts in s["tokens_by_role"].items()]
    if not rows:
        return "<p>No trace lists agent turns.</p>"
    return _table(["run", "role", "turns", "prompt tokens", "completion tokens", "tokens / correct answer [95%]",
                   "turns without usage"], rows, 2)


def comparisons_table(result: dict) -> str:
    warnings = "".join(f'<p class="note">Compared anyway, but {escape(w)}</p>' for w in result["warnings"])
    warnings += "".join(f'<p class="note">{escape(comp["run"])} ran another selection of instances '
                        f'({escape("; ".join(comp["notes"]))}): paired on the instances both hold</p>'
                        for comp in result["comparisons"] if comp.get("notes"))
    warnings += "".join(f'<p class="note">{escape(comp["run"])}: {escape(pairing_words(comp))}</p>'
                        for comp in result["comparisons"] if pairing_words(comp))
    rows = []
    for comp in result["comparisons"]:
        for level, row in [*comp["by_level"].items(), ("overall", comp["overall"])]:
            low, high = row["ci_95"]
            rows.append([comp["run"], level, row["n"], _fmt(row["accuracy_baseline"]), _fmt(row["accuracy_run"]),
                         f"{row['difference']:+.1%}", f"[{low:+.3f}, {high:+.3f}]", format_p(row["mcnemar_p"]),
                         len(row["won"]), len(row["lost"]), format_mdd(row)])
    header = ["run", "level", "paired n", f"baseline ({result['baseline']})", "run", "difference",
              "95% CI (paired bootstrap)", "McNemar p (exact)", "won", "lost",
              "min. detectable difference (80% power)"]
    return warnings + _table(header, rows, 2) + f"<p>{escape(MDD_NOTE)}</p>"


def instances_table(runs: list[Run], pages: dict[tuple[int, str], str]) -> str:
    """One line per instance: each run's verdict (epoch 0's, with the run's correct epochs when it has several),
    linking its page."""
    by_id = [first_epoch(run.rows) for run in runs]
    repeats = [correct_epochs(run.rows) if any(row.epoch for row in run.rows) else {} for run in runs]
    order = list(dict.fromkeys(row.id for run in runs for row in run.rows))
    rows = []
    for task_id in order:
        first = next(rows_of[task_id] for rows_of in by_id if task_id in rows_of)
        cells: list[Any] = []  #: a cell's text, or (text, css class, href, hover title)
        for number, (rows_of, counts) in enumerate(zip(by_id, repeats)):
            row = rows_of.get(task_id)
            if row is None:
                cells.append("—")
                continue
            css = "ok" if row.is_correct else "err" if row.is_error else "fail"
            href = pages.get((number, task_id))
            title = "\n".join(str(text) for text in (row.predicted_call, row.error) if text)
            text = "correct" if css == "ok" else row.stage or "wrong"
            if task_id in counts:
                text += " ({}/{} epochs)".format(*counts[task_id])
            cells.append((text, css, href, title))
        rows.append([task_id, first.level, gold_api_name(first.gold_call), *cells])
    return _table(["instance", "level", "gold API", *(run.name for run in runs)], rows, 3)


def sweep_tables(paths: list) -> str:
    parts = []
    for root in map(Path, paths):
        for name, title in ((SWEEP_CSV, "per cell and level"), (SEEDS_CSV, "over the seeds (mean and sd)")):
            table = root / name
            lines = list(csv.reader(table.read_text(encoding="utf-8").splitlines())) if table.is_file() else []
            if lines:
                parts.append(f"<h3>{escape(str(table))}: {title}</h3>" + _table(lines[0], lines[1:]))
    return "".join(parts)


def frontier_section(runs: list[Run], seed: int, prices, tags: dict[str, str] | None = None) -> str:
    """The accuracy–cost frontier: the plot (the frontier a step line), the table and the neighbours' comparisons."""
    from apibank_bench.reports import frontier

    result = frontier.frontier(runs, prices, seed)
    table = result["price_table"]
    several = any(row.epoch for run in runs for row in run.rows)
    intro = (f"<p>Cost: {escape(result['unit'])} per instance"
             + (" and accuracy of epoch 0 (the pairing's; the runs table's tokens per instance are of all the "
                "epochs)" if several else "")
             + (f" (prices of {escape(table['date'] or 'the command line')})" if table else "")
             + f". Off the frontier, a configuration is <em>dominated</em> when a frontier configuration is "
               f"significantly more accurate (paired, exact McNemar at alpha {result['alpha']:g}, as the gate "
               "decides) or significantly cheaper (paired bootstrap) on the instances they share; else it is "
               "<em>not distinguishable from the frontier</em>.</p>")
    neighbours = frontier.neighbour_lines(result)
    listed = ("<p>Neighbours on the frontier (paired, as <code>compare</code>):</p><ul>"
              + "".join(f"<li>{escape(line)}</li>" for line in neighbours) + "</ul>") if neighbours else ""
    tags = tags or {}
    table = [[*row[:1], *tagged_names(row[1:2], tags), *row[2:]] for row in frontier.rows(result)]
    return (intro + unpaired_note(tags) + image(frontier.plot(result, tags), "accuracy-cost frontier")
            + f'<div id="frontier">{_table(frontier.HEADER, table, name_columns=2)}</div>' + listed)
