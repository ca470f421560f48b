"""The closing table of a run: a rule with the run's name, the table, what is incomplete, and where the
results are. `apibank-bench run` prints it last; under plain pytest it closes the terminal summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from apibank_bench.core.settings import flag
from apibank_bench.runs.results import RESULTS, UNREADABLE
from apibank_bench.runs.summary import table_lines
from apibank_bench.runs.team import protocol_words
from apibank_bench.runs.naming import results_dir
from apibank_bench.scoring.stage import Stage


class YellowLine(str):
    """A line of the closing table printed in yellow where the terminal has colour."""


def answered_by_lines(paths: dict | None) -> list[str]:
    """Which path a function-calling run's answers came through, and a warning when none came through a tool call."""
    if not paths:
        return []
    counts = paths["rows"]
    lines = ["answered by: " + ", ".join(f"{path} {count}" for path, count in counts.items())]
    turns = paths.get("turns") or {}
    if turns and turns != counts:
        lines.append("agent turns answered by: " + ", ".join(f"{path} {count}" for path, count in turns.items()))
    if not paths.get("tool_calls"):
        lines.append(YellowLine(f"NO TOOL CALLS: none of the {sum(counts.values())} answers came through a tool call; "
                             "every one was read from text, so this is not a function-calling result"))
    return lines


def closing_lines(cfg, summary: dict, error_reasons: dict[str, str] | None = None, width: int = 80) -> list[str]:
    """The closing table: a rule with the run's name, the table, what is incomplete, and where the results are."""
    described = summary["config"].get("model", {})
    model = described.get("model", "?")
    if described.get("final_model"):  # `--model-role`: the model whose answers are scored
        model = (f"mixed, {described['final_role']}: {described['final_model']}" if described.get("mixed")
                 else described["final_model"])
    label = "gold calls (harness self-check, no model)" if cfg.is_gold else f"{cfg.topology} / {model}"
    protocol = protocol_words(cfg.to_dict())
    if protocol:
        label = f"{cfg.topology} ({protocol}) / {model}"
    lines = [f" API-Bank: {label} ".center(width, "="), *table_lines(summary)]
    from apibank_bench.agents.topologies import as_run

    if not cfg.is_gold and as_run(cfg)[1].agent_kind == "sdk":  # an alias's agents are its own kind
        lines += answered_by_lines(summary.get("answered_by"))
    counts = Counter({code: count for code, count in (summary.get("failures_by_reason") or {}).items()
                      if code.startswith(f"{Stage.ERROR}:")})
    for code, count in counts.most_common(3):
        lines.append(f"{code} x{count}: {(error_reasons or {}).get(code, '-')}")
    selection = summary.get("selection") or {}
    if selection.get("deselected"):
        by = ", ".join(f"{name} {value}" if not isinstance(value, bool) else name
                       for name, value in selection.get("pytest", {}).items())
        lines.append(f"selection: {selection['deselected']} of the {selection['instances']} selected instances "
                     f"deselected by pytest ({by}); they are not counted as not run")
    closed = summary.get("closed_connections") or {}
    if closed.get("count"):
        lines.append(f"the server closed {closed['count']} connections without an answer, with up to "
                     f"{closed['most_in_flight']} requests in flight: it closes connections under load; "
                     f"the in-flight limit that held: {closed['in_flight_limit']} "
                     f"({flag('max_in_flight')} caps it)")
    for forced in summary.get("forced") or []:
        lines.append(f"FORCED ({forced['at']}): this folder's run continued with other settings: "
                     + "; ".join(forced["differences"]))
    if summary.get("unreadable_lines"):
        lines.append(f"UNREADABLE: {summary['unreadable_lines']} lines of {RESULTS} could not be read; their bytes are "
                     f"kept in {RESULTS}{UNREADABLE}, their instances count as not run")
    if summary.get("stopped"):
        lines.append(f"STOPPED: {summary['stopped']}")
    if not summary.get("complete", True):
        lines.append(f"INCOMPLETE: {summary.get('errors', 0)} instances errored and {summary.get('not_run', 0)} did "
                     f"not run; `accuracy` counts them as not correct. Rerun with {flag('resume')} to finish.")
    lines.append(f"results: {Path(results_dir(cfg)).resolve()}  (one instance: apibank-bench show ID "
                 f"--out-dir {results_dir(cfg)})")
    return lines
