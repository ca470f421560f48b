"""A sweep's tables: per cell and level the accuracy with its interval, the spread over seeds, chat against
function calling, and the accuracy–cost frontier."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path
from typing import Any, Mapping

from apibank_bench.core.files import write_atomic
from apibank_bench.sweeps.cell_job import status
from apibank_bench.sweeps.grid import Cell, axis_label

SWEEP_CSV, SWEEP_MD, SEEDS_CSV, MODES_CSV = "sweep.csv", "sweep.md", "sweep_seeds.csv", "sweep_modes.csv"

LEVEL_COLUMNS = ["status", "n", "correct", "errors", "accuracy", "wilson_low", "wilson_high"]
CELL_COLUMNS = ["tokens", "tokens_per_instance", "instances_missing_usage", "wall_time_s"]
#: A cell of several epochs: its attempts ((instance, epoch) rows; `n` counts instances) and its spread
#: across the epochs' seeds (runs.epochs). `epochs` is left out when it is an axis (it is then already a column).
EPOCH_COLUMNS = ["epochs", "attempts", "epoch_accuracies", "sd_over_epochs", "flip_rate"]
#: A chat cell against an sdk cell of its setup (reports.modes): both accuracies, sdk - chat with its paired
#: bootstrap interval, the exact McNemar p, and each cell's answered_by mix.
MODES_COLUMNS = ["model", "topology", "chat_cell", "sdk_cell", "tool_parse", "history", "paired", "chat_accuracy",
                 "sdk_accuracy", "difference", "ci_low", "ci_high", "mcnemar_p", "chat_answered_by", "sdk_answered_by"]


def shown_values(cell: Cell) -> dict[str, str]:
    """A cell's axis values as its tables show them (a role's model without its endpoint)."""
    return {name: axis_label(name, value) for name, value in cell.values.items()}


def levels_of(cells: list[Cell]) -> list[str]:
    return sorted({level for cell in cells if cell.summary for level in cell.summary.get("by_level", {})})


def _part(part: dict) -> dict:
    low, high = part["wilson_95"]
    values = {"n": part["total"], "correct": part["correct"], "errors": part["errors"],
              "accuracy": round(part["accuracy"], 4), "wilson_low": round(low, 4), "wilson_high": round(high, 4)}
    repeats = part.get("epochs")
    if repeats:
        sd = repeats["sd_over_epochs"]
        values.update(epochs=repeats["epochs"], attempts=part["attempts"], flip_rate=round(repeats["flip_rate"], 4),
                      sd_over_epochs=None if sd is None else round(sd, 4),
                      epoch_accuracies=" ".join(f"{a:.4f}" for a in repeats["accuracy_by_epoch"].values()))
    return values


def cell_rows(cells: list[Cell]) -> list[dict]:
    """The long table: per cell an `overall` row (with the cell's tokens and wall time) and one per level."""
    rows = []
    for cell in cells:
        base: dict[str, Any] = {"folder": cell.path.name, **shown_values(cell)}  # an `epochs` axis value is replaced by the count run
        summary = cell.summary
        if summary is None:
            rows.append({**base, "level": "overall", "status": status(cell)})
            continue
        tokens = summary.get("tokens_per_instance") or {}
        per_instance = tokens.get("total_per_instance")
        rows.append({**base, "level": "overall", "status": status(cell), **_part(summary),
                     "tokens": (summary.get("tokens") or {}).get("prompt_tokens", 0)
                     + (summary.get("tokens") or {}).get("completion_tokens", 0),
                     "tokens_per_instance": None if per_instance is None else round(per_instance, 1),
                     "instances_missing_usage": tokens.get("instances_missing_usage"),
                     "wall_time_s": summary.get("wall_time_s")})
        for level, part in summary.get("by_level", {}).items():
            rows.append({**base, "level": level, "status": status(cell), **_part(part)})
    return rows


def seed_rows(axes: Mapping[str, list[str]], cells: list[Cell]) -> list[dict]:
    """Mean ± sample sd of accuracy over the seeds, per group of the other axes and per level."""
    others = [name for name in axes if name != "seed"]
    groups: dict[tuple, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(tuple(cell.values[name] for name in others), []).append(cell)
    rows = []
    for key, members in groups.items():
        ran = [cell.summary for cell in members if cell.summary]
        for level in ["overall", *levels_of(members)]:
            parts = [summary if level == "overall" else summary["by_level"][level]
                     for summary in ran if level == "overall" or level in summary.get("by_level", {})]
            accuracies = [part["accuracy"] for part in parts]
            rows.append({**dict(zip(others, key)), "level": level, "seeds": len(accuracies),
                         "all_complete": len(ran) == len(members) and all(s.get("complete") for s in ran),
                         "mean_accuracy": round(statistics.fmean(accuracies), 4) if accuracies else None,
                         "sd_accuracy": round(statistics.stdev(accuracies), 4) if len(accuracies) > 1 else None,
                         "min_accuracy": round(min(accuracies), 4) if accuracies else None,
                         "max_accuracy": round(max(accuracies), 4) if accuracies else None,
                         "accuracies": " ".join(f"{a:.4f}" for a in accuracies)})
    return rows


def to_csv(rows: list[dict], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
    return buffer.getvalue()


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _accuracy_text(part: dict) -> str:
    counts = f"{part['correct']}/{part['n']}" if part.get("attempts") in (None, "", part["n"]) \
        else f"{part['correct']}/{part['attempts']} attempts of {part['n']} instances"
    text = f"{part['accuracy']:.1%} [{part['wilson_low']:.3f}, {part['wilson_high']:.3f}] {counts}"
    return text + (f", {part['errors']} err" if part["errors"] else "")


def cells_markdown(axes: Mapping[str, list[str]], cells: list[Cell], rows: list[dict]) -> str:
    """One line per cell: overall and per-level accuracy with its interval, tokens and wall time."""
    levels = levels_of(cells)
    by_cell: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_cell.setdefault(row["folder"], {})[row["level"]] = row
    repeats = any(_repeated(row) for row in rows)
    header = [*axes, "status", "accuracy [95% Wilson] correct/n", *(f"level {level}" for level in levels),
              "tokens/instance", "wall time", *(["spread over epochs"] if repeats else [])]
    lines = []
    for cell in cells:
        parts = by_cell[cell.path.name]
        overall = parts["overall"]
        if cell.summary is None:
            lines.append([*shown_values(cell).values(), overall["status"], *["—"] * (len(header) - len(axes) - 1)])
            continue
        per_instance = overall.get("tokens_per_instance")
        wall = overall.get("wall_time_s")
        lines.append([*shown_values(cell).values(), overall["status"], _accuracy_text(overall),
                      *(_accuracy_text(parts[level]) if level in parts else "—" for level in levels),
                      "—" if per_instance is None else f"{per_instance:.0f}",
                      "—" if wall is None else f"{wall:.1f} s", *([_spread(overall)] if repeats else [])])
    return _markdown(header, lines)


def _repeated(row: dict) -> bool:
    """Whether a table row holds a cell's epoch statistics (an `epochs` axis value alone is not them)."""
    return "flip_rate" in row


def _spread(row: dict) -> str:
    """A cell's spread across its epochs: the sd of the epochs' accuracies and the flip rate."""
    if not _repeated(row):
        return "—"
    sd = "—" if row["sd_over_epochs"] is None else f"{100 * row['sd_over_epochs']:.1f}"
    return f"sd {sd} points over {row['epochs']} epochs, flip rate {row['flip_rate']:.1%}"


def seeds_markdown(axes: Mapping[str, list[str]], rows: list[dict]) -> str:
    others = [name for name in axes if name != "seed"]
    levels = list(dict.fromkeys(row["level"] for row in rows))
    groups: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[name] for name in others), {})[row["level"]] = row

    def text(row: dict | None) -> str:
        if not row or row["mean_accuracy"] is None:
            return "—"
        sd = "—" if row["sd_accuracy"] is None else f"{100 * row['sd_accuracy']:.1f}"
        return (f"{100 * row['mean_accuracy']:.1f} ± {sd} ({row['seeds']} seeds, "
                f"{100 * row['min_accuracy']:.1f}–{100 * row['max_accuracy']:.1f})")

    header = [*others, *(f"{'overall' if level == 'overall' else 'level ' + level} accuracy % (mean ± sd)"
                         for level in levels)]
    return _markdown(header, [[*key, *(text(parts.get(level)) for level in levels)] for key, parts in groups.items()])


def frontier_markdown(cells: list[Cell], prices=None) -> str:
    """The accuracy–cost frontier over the cells that have results (reports/frontier.py), or "" under two."""
    from apibank_bench.reports import frontier
    from apibank_bench.reports.pairs import load_run
    from apibank_bench.runs.results import RESULTS

    ran = [cell for cell in cells if cell.summary and (cell.path / RESULTS).is_file()]
    if len(ran) < 2:
        return ""
    runs = [load_run(cell.path, cell.label) for cell in ran]
    return f"\n## Accuracy–cost frontier\n\n{frontier.markdown(frontier.frontier(runs, prices))}\n"


def mode_comparisons(cells: list[Cell]) -> list[dict]:
    """Chat against function calling (reports.modes): each chat cell paired with the sdk cells of its setup."""
    from apibank_bench.reports import modes
    from apibank_bench.reports.pairs import load_run
    from apibank_bench.runs.results import RESULTS

    ran = [load_run(cell.path, cell.label) for cell in cells if cell.summary and (cell.path / RESULTS).is_file()]
    return modes.mode_comparisons(ran) if len(ran) > 1 else []


def modes_markdown(found: list[dict]) -> str:
    """The model x mode table of `mode_comparisons`, or "" when no chat cell has an sdk cell of its setup."""
    from apibank_bench.reports import modes

    if not found:
        return ""
    table = _markdown(modes.HEADER, [[str(value) for value in row] for row in modes.rows(found)])
    notes = "".join(f"\n{comp['sdk']}: {modes.NO_TOOL_CALLS}.\n" for comp in found if modes.no_tool_calls(comp))
    return f"\n## Chat against function calling (model x mode, paired)\n\n{table}\n{notes}"


def mode_rows(found: list[dict]) -> list[dict]:
    """sweep_modes.csv: a row per chat/sdk pair, its numbers unrounded (paired on epoch 0's instances)."""
    from apibank_bench.reports.modes import mix_text

    rows = []
    for comp in found:
        overall = comp["overall"]
        low, high = overall["ci_95"]
        rows.append({"model": comp["model"], "topology": comp["topology"], "chat_cell": comp["chat"],
                     "sdk_cell": comp["sdk"], "tool_parse": comp["tool_parse"], "history": comp["history"],
                     "paired": overall["n"], "chat_accuracy": round(overall["accuracy_baseline"], 4),
                     "sdk_accuracy": round(overall["accuracy_run"], 4), "difference": round(overall["difference"], 4),
                     "ci_low": round(low, 4), "ci_high": round(high, 4), "mcnemar_p": overall["mcnemar_p"],
                     "chat_answered_by": mix_text(comp["answered_by"]["chat"]),
                     "sdk_answered_by": mix_text(comp["answered_by"]["sdk"])})
    return rows


def write_tables(out: Path, axes: Mapping[str, list[str]], cells: list[Cell], prices=None) -> str:
    """sweep.csv, sweep.md (and sweep_seeds.csv when seed is an axis); returns the Markdown. With two cells
    or more that have results, sweep.md pairs chat and sdk cells of one setup (`modes_markdown`; the same
    table in sweep_modes.csv) and marks the accuracy–cost frontier (`prices`: a runs.cost.PriceTable)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = cell_rows(cells)
    extra = [name for name in EPOCH_COLUMNS if name not in axes] if any(_repeated(row) for row in rows) else []
    write_atomic(out / SWEEP_CSV, to_csv(rows, ["folder", *axes, "level", *LEVEL_COLUMNS, *CELL_COLUMNS, *extra]))
    markdown = f"## Sweep: {len(cells)} cells\n\n{cells_markdown(axes, cells, rows)}\n"
    if "seed" in axes:
        seeds = seed_rows(axes, cells)
        others = [name for name in axes if name != "seed"]
        write_atomic(out / SEEDS_CSV, to_csv(seeds, [*others, "level", "seeds", "all_complete", "mean_accuracy",
                                                     "sd_accuracy", "min_accuracy", "max_accuracy", "accuracies"]))
        markdown += f"\n## Accuracy over seeds {', '.join(axes['seed'])}\n\n{seeds_markdown(axes, seeds)}\n"
    modes = mode_comparisons(cells)
    if modes:
        write_atomic(out / MODES_CSV, to_csv(mode_rows(modes), MODES_COLUMNS))
    markdown += modes_markdown(modes)
    markdown += frontier_markdown(cells, prices)
    write_atomic(out / SWEEP_MD, markdown)
    return markdown
