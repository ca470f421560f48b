"""One instance, readable at a glance: the dialogue, every agent turn, the team's decision, the scored
and the gold call, the stage and the error.

Built from a results folder (its `results.jsonl` line and `traces/<id>.json`), and generic over a
trace's turns: whatever a topology does, each turn has a role, a round, what it was shown and what
it answered. The same sections are printed by `apibank-bench show` and rendered as a page of the
HTML report.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from apibank_bench.core.text import shortened
from apibank_bench.runs.results import RESULTS, TRACES, read_rows, read_summary, read_trace, trace_name
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.team import protocol_words
from apibank_bench.scoring.stage import Stage

PROMPT_CHARS = 400  #: how much of the end of each agent's prompt is shown (the task and the team's words)
DEFAULT_RESULTS = Path("results") / "apibank"


@dataclass
class Instance:
    id: str
    row: ResultRow  #: its results.jsonl row
    trace: dict  #: its trace ({} when the folder has none, as `apibank-bench score` writes)
    folder: Path


def _matches(row_id: str, wanted: str) -> bool:
    """An ID as in the manifest, without its `level-N::` prefix, or as its trace file is named."""
    return wanted in (row_id, row_id.split("::", 1)[1] if row_id.startswith("level-") else row_id,
                      trace_name(row_id), trace_name(row_id).removesuffix(".json"))


def folders_holding(task_id: str, under: Path = DEFAULT_RESULTS) -> list[Path]:
    """The results folders under `under` whose results.jsonl has `task_id`."""
    return sorted(path.parent for path in Path(under).glob(f"**/{RESULTS}")
                  if any(_matches(row.id, task_id) for row in read_rows(path.parent)))


def load_instance(task_id: str, folder: Path | None = None, epoch: int = 0) -> Instance:
    """One instance of a results folder (default: the one folder under results/apibank that holds it).

    The errors say what to do: which folders hold it, or where the valid IDs are.
    """
    if folder is None:
        found = folders_holding(task_id)
        if not found:
            raise LookupError(f"no results folder under {DEFAULT_RESULTS}/ holds {task_id!r}; "
                              "pass --out-dir with the run's folder")
        if len(found) > 1:
            raise LookupError(f"{len(found)} results folders hold {task_id!r}: "
                              + ", ".join(map(str, found)) + "; pick one with --out-dir")
        folder = found[0]
    folder = Path(folder)
    if not (folder / RESULTS).is_file():
        raise FileNotFoundError(f"{folder} is not a results folder (no {RESULTS}); pass --out-dir with a run's "
                                "folder (e.g. results/apibank/single)")
    every = read_rows(folder)
    rows = [row for row in every if _matches(row.id, task_id) and row.key[1] == epoch]
    if not rows:
        raise LookupError(f"{folder / RESULTS} has no instance {task_id!r}; its IDs are the `id` field of each "
                          f"line (e.g. {', '.join(row.id for row in every[:2])})")
    row = rows[-1]
    trace_file = folder / TRACES / trace_name(row.id, epoch)
    trace = read_trace(trace_file) if trace_file.is_file() else {}
    return Instance(row.id, row, trace, folder)


def dialogue_lines(task_id: str, root=None) -> list[str]:
    """The dialogue before the call, as the agents were shown it (needs the API-Bank data)."""
    from apibank_bench.agents.prompts import format_history
    from apibank_bench.core.paths import DataMissing
    from apibank_bench.data.tasks import get_task

    try:
        return format_history(get_task(task_id, root=root)).splitlines()
    except (DataMissing, KeyError, ValueError, OSError) as exc:
        return [f"(not shown: {str(exc).splitlines()[0]})"]


def _shown(turn: dict) -> str:
    """What an agent was shown last (its last message that is not its own answer)."""
    messages = [m for m in turn.get("messages") or () if m.get("role") != "assistant"]
    return str(messages[-1].get("content") or "") if messages else ""


def _turn_head(number: int, turn: dict) -> str:
    facts = [f"round {turn.get('round', 0)}", f"{turn.get('prompt_tokens', 0)}+{turn.get('completion_tokens', 0)} "
             "tokens", f"{turn.get('latency_s') or 0:.2f} s"]
    if turn.get("cached"):
        facts.append("from the cache")
    if turn.get("model"):  # the model that answered (a model per role: --model-role)
        facts.append(f"model {turn['model']}")
    return f"turn {number}: {turn.get('role', '?')} #{turn.get('index', 0)} ({', '.join(facts)})"


def turn_lines(turn: dict, prompt_chars: int) -> list[str]:
    lines = ["  shown (the end of it):", *("    " + line for line in shortened(_shown(turn).strip(), prompt_chars, end=True).splitlines())]
    lines += ["  answer:", *("    " + line for line in (str(turn.get("answer") or "") or "(empty)").splitlines())]
    for call in turn.get("tool_calls") or ():
        lines.append(f"  tool call: {call.get('name')}({call.get('arguments')})")
    found = turn.get("text_tool_call")
    if found:
        lines.append(f"  tool call in the text ({found.get('format')}): "
                     + ("malformed" if found.get("malformed") else f"{found.get('name')}({found.get('arguments')})"))
    if turn.get("answered_by"):
        lines.append(f"  answered by: {turn['answered_by']}"
                     + (f" (tool call not read: {turn['tool_reason']})" if turn.get("tool_reason") else ""))
    lines.append(f"  parsed call: {turn.get('call') or 'none'}")
    if turn.get("error"):
        lines.append(f"  error: {turn['error']}")
    return lines


def decision_lines(trace: dict) -> list[str]:
    """How the team's answer was chosen: the vote's tally, else the last turn (a manager, a last stage)."""
    turns = trace.get("agents") or []
    vote = trace.get("vote")
    if vote:
        lines = [f"vote ({vote.get('rule', 'reference')} rule): "
                 + f"{sum(key is not None for key in vote.get('keys') or [])} of {len(vote.get('keys') or [])} "
                 "agents voted"]
        lines += [f"  {count} x {key}" for key, count in vote.get("tally") or []]
        winner = vote.get("winner")
        chosen = f"turn {_position(turns, winner, vote)}" if winner is not None else "no answer (nobody voted)"
        return lines + [f"  the team submits: {chosen}"]
    if len(turns) > 1:
        last = turns[-1]
        return [f"the team submits the last turn's answer: {last.get('role')} #{last.get('index', 0)}, "
                f"round {last.get('round', 0)} (turn {len(turns)})"]
    return []


def _position(turns: list[dict], winner: int, vote: dict) -> str:
    """The winner indexes the voting turns (the last round's): name it by its turn number in the trace."""
    voters = len(vote.get("keys") or [])
    offset = len(turns) - voters
    index = offset + winner
    if 0 <= index < len(turns):
        turn = turns[index]
        return f"{index + 1} ({turn.get('role')} #{turn.get('index', 0)}, round {turn.get('round', 0)})"
    return f"of agent {winner}"


def sections(instance: Instance, prompt_chars: int = PROMPT_CHARS, root=None) -> list[tuple[str, list[str]]]:
    """The instance as titled blocks of lines (the terminal and the HTML page show the same)."""
    row, trace = instance.row, instance.trace
    verdict = "correct" if row.is_correct else (Stage.ERROR if row.is_error else "wrong")  # an error row: its stage
    head = [f"level {row.level} · {verdict} · stage {row.stage} · from {instance.folder}"]
    protocol = protocol_words(_setup(instance.folder))
    if protocol:
        head.append(f"· {protocol}")  # the turns below are replicas, not the topology's roles talking
    result = [f"scored call: {row.predicted_call or 'none'}", f"gold call:   {row.gold_call}",
              f"stage:       {row.stage}" + (" (correct)" if row.is_correct else "")]
    if row.reason:
        result.append(f"reason:      {row.reason}")
    if row.answered_by:
        result.append(f"answered by: {row.answered_by}")
    if row.error:
        result.append(f"error:       {row.error}")
    blocks = [(instance.id, head), ("dialogue", dialogue_lines(instance.id, root))]
    turns = trace.get("agents") or []
    for number, turn in enumerate(turns, start=1):
        blocks.append((_turn_head(number, turn), turn_lines(turn, prompt_chars)))
    if not turns:
        solver = trace.get("solver") or ("no trace in this folder" if not trace else "the trace lists no turns")
        blocks.append(("agent turns", [f"(none: {solver})"]))
    decision = decision_lines(trace)
    if decision:
        blocks.append(("the team's decision", decision))
    blocks.append(("result", result))
    return blocks


def _setup(folder: Path) -> dict:
    """The run's recorded settings (summary.json's `config.run`; {} when there is none to read)."""
    try:
        summary = read_summary(folder) or {}
    except (OSError, ValueError):
        return {}
    return (summary.get("config") or {}).get("run") or {}


def to_text(blocks: list[tuple[str, list[str]]]) -> str:
    out = []
    for title, lines in blocks:
        out += [f"== {title}", *lines, ""]
    return "\n".join(out)


PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 70em; }
h2 { font-size: 1em; margin: 1.2em 0 0.3em; } pre { white-space: pre-wrap; overflow-wrap: anywhere;
background: #f6f6f6; padding: 0.5em; margin: 0; }
"""


def to_html(blocks: list[tuple[str, list[str]]], back: str | None = None, raw: str | None = None) -> str:
    """A page of the same blocks; everything a model wrote is escaped."""
    title, *rest = blocks
    links = " · ".join(f'<a href="{escape(href)}">{text}</a>' for text, href in
                       (("back to the report", back), ("the raw trace (JSON)", raw)) if href)
    body = "".join(f"<h2>{escape(name)}</h2><pre>{escape(chr(10).join(lines))}</pre>" for name, lines in rest)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title[0])}</title>'
            f"<style>{PAGE_STYLE}</style></head><body><h1>{escape(title[0])}</h1><p>{escape(' '.join(title[1]))}"
            f"</p><p>{links}</p>{body}</body></html>\n")
