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
    lines += selection_lines(summary, results_dir(cfg))
    closed = summary.get("closed_connections") or {}
    if closed.get("count"):
        lines.append(f"the server closed {closed['count']} connections without an answer, with up to "
                     f"{closed['most_in_flight']} requests in flight: it closes connections under load; "
                     f"the in-flight limit that held: {closed['in_flight_limit']} "
                     f"({flag('max_in_flight')} caps it)")
    lines += rate_limit_lines(summary)
    for forced in summary.get("forced") or []:
        lines.append(f"FORCED ({forced['at']}): this folder's run continued with other settings: "
                     + "; ".join(forced["differences"]))
    if summary.get("unreadable_lines"):
        lines.append(f"UNREADABLE: {summary['unreadable_lines']} lines of {RESULTS} could not be read; their bytes are "
                     f"kept in {RESULTS}{UNREADABLE}, their instances count as not run")
    if summary.get("stopped"):
        lines.append(f"STOPPED: {summary['stopped']}")
    if summary.get("errors") or summary.get("not_run"):  # (deselected cases without a row: said above)
        lines.append(incomplete_line(summary))
    lines.append(f"results: {Path(results_dir(cfg)).resolve()}  (one instance: apibank-bench show ID "
                 f"--out-dir {results_dir(cfg)})")
    return lines


def epochs_of(summary: dict) -> int:
    """The epochs of the run a summary describes (1 for summaries that record none: `score`, older runs)."""
    run = (summary.get("config") or {}).get("run") or {}
    return int(run.get("epochs") or (summary.get("selection") or {}).get("epochs") or 1)


def cases_words(summary: dict) -> tuple[str, str]:
    """What the summary's case counts count, singular and plural: instances, or with epochs cases
    (an instance in one epoch: runs.epochs)."""
    return ("case", "cases") if epochs_of(summary) > 1 else ("instance", "instances")


def _count(number: int, words: tuple[str, str]) -> str:
    return f"{number} {words[0] if number == 1 else words[1]}"


def selected_text(summary: dict) -> str:
    """`8 selected instances`, or with epochs `20 selected cases (10 instances x 2 epochs)`."""
    selected = summary.get("selected", summary.get("attempts", summary["total"]))
    text = f"{selected} selected {cases_words(summary)[1]}"
    epochs = epochs_of(summary)
    if epochs > 1:
        instances = (summary.get("selection") or {}).get("instances")
        text += f" (an instance in one epoch: {instances} instances x {epochs} epochs)" if instances \
            else f" (an instance in one of {epochs} epochs)"
    return text


def incomplete_line(summary: dict) -> str:
    """What an incomplete folder lacks, in the units the rows have, and what its accuracy is over."""
    epochs = epochs_of(summary)
    words = cases_words(summary)
    rows = summary.get("attempts", summary["total"])
    unheld = (summary.get("selection") or {}).get("deselected_without_row") or 0
    not_run = summary.get("not_run") or 0
    why = [f"{count} {what}" for count, what in ((not_run, "did not run"), (unheld, "deselected by pytest")) if count]
    row_words = ("attempt", "attempts") if epochs > 1 else ("instance", "instances")
    errored = summary.get("errors") or 0
    return (f"INCOMPLETE: of the {selected_text(summary)}, {rows} have a row"
            + (f" and {not_run + unheld} have none ({', '.join(why)})" if why else "")
            + f"; {_count(errored, row_words)} errored. accuracy {summary['accuracy']:.1%} is over the "
            f"{_count(rows, row_words)} with a row: an errored {row_words[0]} counts as not correct, "
            f"{words[1]} without a row are left out. Rerun with {flag('resume')} to finish.")


def selection_lines(summary: dict, out_dir) -> list[str]:
    """What pytest deselected, and rows of another selection this session joined (`-k` into a folder)."""
    selection = summary.get("selection") or {}
    lines = []
    if selection.get("deselected"):
        by = ", ".join(f"{name} {value}" if not isinstance(value, bool) else name
                       for name, value in selection.get("pytest", {}).items())
        unheld = selection.get("deselected_without_row") or 0
        lines.append(f"selection: {selection['deselected']} of the {selected_text(summary)} deselected by pytest "
                     f"({by}); they are not counted as not run"
                     + (f", but {unheld} of them have no row: the folder does not hold the whole selection "
                        f"(complete: false; {flag('resume')} runs them)" if unheld else ""))
    if selection.get("other_selection"):
        lines.append(f"OTHER SELECTION: {out_dir} held the rows of a run with another selection "
                     f"({'; '.join(selection['other_selection'])}); this session's rows joined them, and the "
                     f"summary counts this session's selection")
    return lines


def rate_limit_lines(summary: dict) -> list[str]:
    """Requests the endpoints throttled (HTTP 429), apart from errors, and the time spent waiting on them."""
    endpoints = (summary.get("endpoints") or {}).values()
    limited = sum(part.get("rate_limited") or 0 for part in endpoints)
    if not limited:
        return []
    waited = sum(part.get("rate_limit_wait_s") or 0.0 for part in endpoints)
    return [f"rate limits: {limited} requests were answered HTTP 429 (throttled, retried; not counted as errors), "
            f"{waited:.1f} s spent waiting to retry them (the server's Retry-After honoured)"]
