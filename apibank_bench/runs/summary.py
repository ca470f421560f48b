"""What `summary.json` says about a run's rows: accuracy with intervals, errors, failures, tokens.

A row with `stage: "error"` is an infrastructure failure (endpoint down, timeout, crash), not
an answer: it counts as an error and never as correct. Accuracy is given over all instances
(errors count against it) and over the completed ones. Token usage a server did not report is
counted as missing, never as zero.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from apibank_bench.runs.stats import wilson

STAGES = ("parse", "api_name", "score", "error")
SMALL_N = 20  #: below this many instances an accuracy is flagged as too noisy to read alone
_API_NAME = re.compile(r"\s*\[?\s*([A-Za-z_]\w*)\s*\(")


def is_error(row: dict) -> bool:
    return row.get("stage") == "error"


def is_correct(row: dict) -> bool:
    return bool(row.get("correct")) and not is_error(row)


def gold_api_name(gold_call: str | None) -> str:
    """`[AddAgenda(content=...)]` -> `AddAgenda` (`?` when the text has no call shape)."""
    match = _API_NAME.match(gold_call or "")
    return match.group(1) if match else "?"


def accuracy(rows: list[dict]) -> dict:
    """n, correct, errors, accuracy over all and over completed rows, the Wilson 95 % interval, flags."""
    n = len(rows)
    correct = sum(1 for row in rows if is_correct(row))
    errors = sum(1 for row in rows if is_error(row))
    completed = n - errors
    flags = []
    if n < SMALL_N:
        flags.append("small_n")
    if errors:
        flags.append("errors")
    low, high = wilson(correct, n)
    return {"total": n, "correct": correct, "accuracy": correct / n if n else 0.0,
            "errors": errors, "completed": completed,
            "accuracy_completed": correct / completed if completed else None,
            "wilson_95": [low, high], "flags": flags}


def _grouped(rows: list[dict], key) -> dict[str, dict]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return {name: accuracy(groups[name]) for name in sorted(groups)}


def _usage(record: dict) -> tuple[int, int] | None:
    """(prompt, completion) tokens, or None when not reported (a prompt always has some tokens)."""
    prompt, completion = record.get("prompt_tokens"), record.get("completion_tokens")
    if not prompt or completion is None:
        return None
    return int(prompt), int(completion)


def instance_tokens(rows: list[dict]) -> dict:
    """Token totals and per-instance means over the rows whose usage is known.

    A row that made no model call (a gold replay) used zero tokens; a row that made calls but
    carries no usage, or has no usage fields at all (answers scored with `score`), is missing.
    """
    known, missing = [], 0
    for row in rows:
        if row.get("model_calls") == 0:
            known.append((0, 0))
            continue
        usage = _usage(row)
        if usage is None:
            missing += 1
        else:
            known.append(usage)
    prompt = sum(p for p, _ in known)
    completion = sum(c for _, c in known)
    count = len(known)
    return {"instances_counted": count, "instances_missing_usage": missing,
            "prompt_tokens": prompt, "completion_tokens": completion,
            "prompt_per_instance": prompt / count if count else None,
            "completion_per_instance": completion / count if count else None,
            "total_per_instance": (prompt + completion) / count if count else None}


def role_tokens(traces: Iterable[dict]) -> dict[str, dict]:
    """Per agent role (from each trace's `agents` list): turns, tokens, and turns without usage."""
    roles: dict[str, Counter] = defaultdict(Counter)
    for trace in traces:
        for turn in trace.get("agents") or []:
            counts = roles[str(turn.get("role", "?"))]
            counts["turns"] += 1
            usage = _usage(turn)
            if usage is None:
                counts["turns_missing_usage"] += 1
            else:
                counts["prompt_tokens"] += usage[0]
                counts["completion_tokens"] += usage[1]
    keys = ("turns", "turns_missing_usage", "prompt_tokens", "completion_tokens")
    return {role: {key: roles[role][key] for key in keys} for role in sorted(roles)}


def read_traces(trace_dir: Path | None) -> list[dict]:
    """The traces of a results folder (unreadable files are skipped; they hold no usage to count)."""
    if trace_dir is None or not Path(trace_dir).is_dir():
        return []
    traces = []
    for path in sorted(Path(trace_dir).glob("*.json")):
        try:
            traces.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return traces


def summarize_rows(rows: list[dict], traces: Iterable[dict] = ()) -> dict:
    """The statistics of summary.json for a run's results rows (and its traces, for per-role tokens)."""
    failures = Counter(row.get("stage") for row in rows if not is_correct(row))
    tokens = instance_tokens(rows)
    return {
        **accuracy(rows),
        "by_level": _grouped(rows, lambda row: str(row.get("level"))),
        "by_api": _grouped(rows, lambda row: gold_api_name(row.get("gold_call"))),
        "failures_by_stage": {stage: failures.get(stage, 0) for stage in STAGES},
        "tokens": {"prompt_tokens": tokens["prompt_tokens"], "completion_tokens": tokens["completion_tokens"]},
        "tokens_per_instance": tokens,
        "tokens_by_role": role_tokens(traces),
    }


def table_lines(summary: dict) -> list[str]:
    """The terminal table of a summary: per level and overall, with intervals, errors and flags."""
    lines = [f"{'level':<8}{'correct':>8}{'n':>5}{'errors':>7}{'accuracy':>10}  {'95% Wilson':<16}flags"]
    for level, part in [*summary["by_level"].items(), ("overall", summary)]:
        low, high = part["wilson_95"]
        lines.append(f"{level:<8}{part['correct']:>8}{part['total']:>5}{part['errors']:>7}{part['accuracy']:>10.1%}"
                     f"  [{low:.3f}, {high:.3f}]  {', '.join(part['flags'])}".rstrip())
    if summary["errors"]:
        completed = summary["accuracy_completed"]
        lines.append(f"accuracy over the {summary['completed']} completed instances: "
                     + ("-" if completed is None else f"{completed:.1%}"))
    lines.append("failures by stage: " + ", ".join(f"{k} {v}" for k, v in summary["failures_by_stage"].items()))
    tokens = summary["tokens_per_instance"]
    if tokens["total_per_instance"] is not None:
        lines.append(f"tokens per instance: {tokens['total_per_instance']:.0f}"
                     + (f" (usage missing for {tokens['instances_missing_usage']} instances)"
                        if tokens["instances_missing_usage"] else ""))
    return lines


JSON_REPORT_KEY = "apibank"


def add_summary_to_json_report(json_report: dict, summary: dict | None) -> None:
    """pytest-json-report's `pytest_json_modifyreport` body: the run's summary beside the tests' records."""
    if summary is not None:
        json_report[JSON_REPORT_KEY] = summary
