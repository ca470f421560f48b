"""What `summary.json` says about a run's rows: accuracy with intervals, errors, failures, tokens.

A row at `Stage.ERROR` is an infrastructure failure (endpoint down, timeout, crash), not
an answer: it counts as an error and never as correct. Accuracy is given over all instances
(errors count against it) and over the completed ones. Token usage a server did not report is
counted as missing, never as zero.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from apibank_bench.runs.cost import tokens_by, tokens_by_model, turn_usage
from apibank_bench.runs.epochs import correct_epochs, epoch_summary
from apibank_bench.runs.stats import clustered_wilson, ratio_bootstrap
from apibank_bench.runs.team import team_summary
from apibank_bench.runs.row import ResultRow
from apibank_bench.scoring.answered_by import AnsweredBy
from apibank_bench.scoring.stage import Reason, Stage
from apibank_bench.runs.versions import TRACE, UnsupportedSchemaVersion, read_json_file

UNRECORDED = "unrecorded"  #: the reason of a failed row written before reason codes
SMALL_N = 20  #: below this many instances an accuracy is flagged as too noisy to read alone
_API_NAME = re.compile(r"\s*\[?\s*([A-Za-z_]\w*)\s*\(")


def gold_api_name(gold_call: str | None) -> str:
    """`[AddAgenda(content=...)]` -> `AddAgenda` (`?` when the text has no call shape)."""
    match = _API_NAME.match(gold_call or "")
    return match.group(1) if match else "?"


def accuracy(rows: list[ResultRow]) -> dict:
    """n (instances), correct, errors, accuracy over all and over completed rows, the 95 % interval, flags.

    An instance is the unit: with several epochs it has several rows (`attempts`), which are not
    independent draws, so `total` and the `small_n` flag count instances, and the interval is the
    Wilson interval on the effective number of instances (runs.stats.clustered_wilson; with one
    row per instance exactly the Wilson interval of correct of n). `correct`, `errors` and
    `completed` count rows; `accuracy` is correct rows over rows (the mean over the epochs).
    """
    attempts = len(rows)
    correct = sum(1 for row in rows if row.is_correct)
    errors = sum(1 for row in rows if row.is_error)
    completed = attempts - errors
    clusters = correct_epochs(rows)
    n = len(clusters)
    flags = []
    if n < SMALL_N:
        flags.append("small_n")
    if errors:
        flags.append("errors")
    low, high = clustered_wilson([c for c, _ in clusters.values()], [a for _, a in clusters.values()])
    return {"total": n, "attempts": attempts, "correct": correct, "accuracy": correct / attempts if attempts else 0.0,
            "errors": errors, "completed": completed,
            "accuracy_completed": correct / completed if completed else None,
            "wilson_95": [low, high], "flags": flags}


def _grouped(rows: list[ResultRow], key) -> dict[str, dict]:
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return {name: accuracy(groups[name]) for name in sorted(groups)}


def _usage(prompt: int | None, completion: int | None) -> tuple[int, int] | None:
    """(prompt, completion) tokens, or None when not reported (a prompt always has some tokens)."""
    if not prompt or completion is None:
        return None
    return int(prompt), int(completion)


def instance_tokens(rows: list[ResultRow]) -> dict:
    """Token totals over the rows whose usage is known, and means per instance and per attempt.

    A row that made no model call (a gold replay) used zero tokens; a row that made calls but
    carries no usage, or has no usage fields at all (answers scored with `score`), is missing.
    An instance is the unit: with several epochs its tokens are those of all its attempts (rows),
    and it is counted only when every one of its rows has usage; `*_per_attempt` is per row.
    """
    known: dict[str, list[tuple[int, int]]] = defaultdict(list)
    missing: set[str] = set()
    attempts_missing = 0
    for row in rows:
        usage = (0, 0) if row.model_calls == 0 else _usage(row.prompt_tokens, row.completion_tokens)
        if usage is None:
            missing.add(row.id)
            attempts_missing += 1
        else:
            known[row.id].append(usage)
    prompt = sum(p for parts in known.values() for p, _ in parts)
    completion = sum(c for parts in known.values() for _, c in parts)
    attempts = sum(len(parts) for parts in known.values())
    whole = [parts for instance, parts in known.items() if instance not in missing]
    count = len(whole)
    whole_prompt = sum(p for parts in whole for p, _ in parts)
    whole_completion = sum(c for parts in whole for _, c in parts)
    return {"instances_counted": count, "instances_missing_usage": len(missing),
            "prompt_tokens": prompt, "completion_tokens": completion,
            "prompt_per_instance": whole_prompt / count if count else None,
            "completion_per_instance": whole_completion / count if count else None,
            "total_per_instance": (whole_prompt + whole_completion) / count if count else None,
            "attempts_counted": attempts, "attempts_missing_usage": attempts_missing,
            "total_per_attempt": (prompt + completion) / attempts if attempts else None}


def role_tokens(traces: Iterable[dict]) -> dict[str, dict]:
    """Per agent role (from each trace's `agents` list): turns, tokens, and turns without usage."""
    return tokens_by(traces, lambda turn: str(turn.get("role", "?")))


def read_traces(trace_dir: Path | None) -> list[dict]:
    """The traces of a results folder (unreadable files are skipped; they hold no usage to count; one of a
    version this release does not read is refused: runs.versions)."""
    if trace_dir is None or not Path(trace_dir).is_dir():
        return []
    traces = []
    for path in sorted(Path(trace_dir).glob("*.json")):
        try:
            traces.append(read_json_file(path, TRACE))
        except UnsupportedSchemaVersion:
            raise  # a newer release's trace is refused by name, never skipped as unreadable
        except (OSError, ValueError):
            continue
    return traces


def _row_tokens(row: ResultRow) -> int | None:
    """A row's tokens (0 for a row that made no model call), None when its usage is unknown."""
    if row.model_calls == 0:
        return 0
    usage = _usage(row.prompt_tokens, row.completion_tokens)
    return None if usage is None else sum(usage)


def _per_correct(pairs: Iterable[tuple[str, int, bool]]) -> dict:
    """Tokens per correct answer from (instance, tokens, correct) triples, with a bootstrap interval
    resampling instances (an instance's epochs stay together)."""
    clusters: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for instance, used, right in pairs:
        clusters[instance][0] += used
        clusters[instance][1] += right
    tokens = sum(used for used, _ in clusters.values())
    correct = sum(right for _, right in clusters.values())
    # The resample is drawn over the instances in ID order, not in the order they were read: one figure
    # (a run's, or its one role's, read from rows or from traces) gets one interval wherever it is shown.
    ordered = [clusters[instance] for instance in sorted(clusters)]
    interval = ratio_bootstrap([u for u, _ in ordered], [r for _, r in ordered])
    return {"tokens_per_correct": tokens / correct if correct else None,
            "ci_95": None if interval is None else list(interval),
            "tokens": tokens, "correct": correct, "instances": len(clusters)}


def tokens_per_correct(rows: list[ResultRow]) -> dict:
    """All the run's tokens over its correct answers: the cost of one right call, comparable across
    topologies (a team's tokens are all its agents'). Rows whose usage is unknown are left out of
    both sums (`rows_missing_usage`)."""
    known = [(row.id, _row_tokens(row), row.is_correct) for row in rows]
    result = _per_correct((i, t, c) for i, t, c in known if t is not None)
    result["rows_missing_usage"] = sum(t is None for _, t, _ in known)
    return result


def role_tokens_per_correct(traces: Iterable[dict]) -> dict[str, dict]:
    """Per role: the role's tokens over the team's correct answers (the roles' values add up to the run's)."""
    per_role: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for trace in traces:
        result = trace.get("result") or {}
        turns = trace.get("agents") or []
        usages = [usage for usage in map(turn_usage, turns) if usage is not None]
        if not turns or len(usages) < len(turns) or not result:
            continue
        correct = ResultRow.from_json(result).is_correct  # the row the trace holds
        spent: dict[str, int] = defaultdict(int)
        for turn, usage in zip(turns, usages):
            spent[str(turn.get("role", "?"))] += sum(usage)
        for role, used in spent.items():
            per_role[role].append((str(trace.get("id")), used, correct))
        for role in set(per_role) - set(spent):
            per_role[role].append((str(trace.get("id")), 0, correct))
    return {role: _per_correct(per_role[role]) for role in sorted(per_role)}


def cache_use(traces: Iterable[dict]) -> dict:
    """The agent turns of the traces and how many of them the response cache answered (no request
    was sent: a stored answer, or an identical request in flight at the same time)."""
    turns = [turn for trace in traces for turn in trace.get("agents") or []]
    return {"model_calls": len(turns), "answered_by_cache": sum(1 for turn in turns if turn.get("cached"))}


def _path_counts(paths: Iterable[str]) -> dict[str, int]:
    """Counts of answer paths: every path this version knows (0 when unused), then any other, as read."""
    counts = Counter(paths)
    return {**{str(path): counts.pop(str(path), 0) for path in AnsweredBy}, **dict(sorted(counts.items()))}


def answered_by(rows: list[ResultRow], traces: Iterable[dict] = ()) -> dict | None:
    """Which path the scored answers came through (`rows`: per row) and every agent turn's (`turns`: over the
    traces), as counts of scoring.answered_by.AnsweredBy; `tool_calls`: rows answered by a tool call, the
    server's or one the client read. None when no row names its path (the gold self-check, `score`)."""
    named = [str(row.answered_by) for row in rows if row.answered_by is not None]
    if not named:
        return None
    turns = [str(turn["answered_by"]) for trace in traces for turn in trace.get("agents") or ()
             if turn.get("answered_by")]
    return {"rows": _path_counts(named), "turns": _path_counts(turns),
            "tool_calls": sum(1 for path in named if path in (AnsweredBy.TOOL_CALL, AnsweredBy.CLIENT_PARSE))}


def summarize_rows(rows: list[ResultRow], traces: Iterable[dict] = ()) -> dict:
    """The statistics of summary.json for a run's results rows (and its traces, for per-role tokens,
    the response cache's share and the agent turns' answer paths).

    A run of several epochs adds `epochs` (runs.epochs) overall and per level; a team run adds
    `team` (runs.team).
    """
    traces = list(traces)
    failures = Counter(row.stage for row in rows if not row.is_correct)
    reasons = Counter(str(row.reason or UNRECORDED) for row in rows if not row.is_correct)
    tokens = instance_tokens(rows)
    summary = {
        **accuracy(rows),
        "by_level": _grouped(rows, lambda row: str(row.level)),
        "by_api": _grouped(rows, lambda row: gold_api_name(row.gold_call)),
        "failures_by_stage": {stage: failures.get(stage, 0) for stage in Stage},
        "failures_by_reason": dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
        "tokens": {"prompt_tokens": tokens["prompt_tokens"], "completion_tokens": tokens["completion_tokens"]},
        "tokens_per_instance": tokens,
        "tokens_by_role": role_tokens(traces),
        "tokens_by_model": tokens_by_model(traces),
        "tokens_per_correct": tokens_per_correct(rows),
        "tokens_per_correct_by_role": role_tokens_per_correct(traces),
        "cache": cache_use(traces),
        "argument_type": reasons.get(str(Reason.SCORE_ARGUMENT_TYPE), 0),
    }
    paths = answered_by(rows, traces)
    if paths:
        summary["answered_by"] = paths
    if any(row.epoch for row in rows):
        summary["epochs"] = epoch_summary(rows)
        summary["correct_epochs"] = {task_id: c for task_id, (c, _) in correct_epochs(rows).items()}
        for level in summary["by_level"]:
            summary["by_level"][level]["epochs"] = epoch_summary([r for r in rows if str(r.level) == level])
    team = team_summary(rows)
    if team is not None:
        summary["team"] = team
    return summary


def counts_text(part: dict) -> str:
    """`correct/n`, or with several epochs `correct/attempts attempts of n instances`."""
    attempts = part.get("attempts", part["total"])
    if attempts == part["total"]:
        return f"{part['correct']}/{part['total']}"
    return f"{part['correct']}/{attempts} attempts of {part['total']} instances"


def interval_text(interval: list | tuple | None, spec: str = ".0f") -> str:
    """`[low, high]`, an upper bound that is None (unbounded) written as ∞."""
    if interval is None:
        return "-"
    low, high = interval
    return f"[{format(low, spec)}, {'∞' if high is None else format(high, spec)}]"


def table_lines(summary: dict) -> list[str]:
    """The terminal table of a summary: per level and overall, with intervals, errors and flags.

    With several epochs `n` counts instances and `attempts` their (instance, epoch) rows; the
    interval is then Wilson's on the effective number of instances (see `accuracy`)."""
    repeats = summary.get("attempts", summary["total"]) != summary["total"]
    interval = "95% Wilson (eff. n)" if repeats else "95% Wilson"
    lines = [f"{'level':<8}{'correct':>8}" + (f"{'attempts':>9}" if repeats else "")
             + f"{'n':>5}{'errors':>7}{'accuracy':>10}  {interval:<20}flags"]
    for level, part in [*summary["by_level"].items(), ("overall", summary)]:
        low, high = part["wilson_95"]
        lines.append(f"{level:<8}{part['correct']:>8}" + (f"{part.get('attempts', part['total']):>9}" if repeats else "")
                     + f"{part['total']:>5}{part['errors']:>7}{part['accuracy']:>10.1%}"
                     f"  {f'[{low:.3f}, {high:.3f}]':<20}{', '.join(part['flags'])}".rstrip())
    if repeats:
        lines.append("n counts instances, each solved in several epochs; accuracy is over the attempts")
    if summary["errors"]:
        completed = summary["accuracy_completed"]
        lines.append(f"accuracy over the {summary['completed']} completed " + ("attempts: " if repeats else "instances: ")
                     + ("-" if completed is None else f"{completed:.1%}"))
    lines.append("failures by stage: " + ", ".join(f"{k} {v}" for k, v in summary["failures_by_stage"].items()))
    if summary.get("failures_by_reason"):  # (summaries written before reason codes have none)
        lines.append("failures by reason: " + ", ".join(f"{k} {v}" for k, v in summary["failures_by_reason"].items()))
    if summary.get("argument_type"):
        lines.append(f"argument types: {summary['argument_type']} calls named the gold API with its arguments in "
                     "another JSON type (score:argument_type; the API's verdict stands)")
    lines += tokens_lines(summary["tokens_per_instance"])
    per_correct = summary.get("tokens_per_correct") or {}
    if per_correct.get("tokens_per_correct") is not None and per_correct.get("tokens"):
        lines.append(f"tokens per correct answer: {per_correct['tokens_per_correct']:.0f} "
                     f"{interval_text(per_correct['ci_95'])}")
    lines += cost_lines(summary)
    lines += epoch_lines(summary)
    lines += team_lines(summary.get("team"))
    cache = summary.get("cache") or {}
    if cache.get("model_calls"):
        lines.append(f"response cache: answered {cache['answered_by_cache']} of {cache['model_calls']} model calls "
                     "(no request sent)")
    return lines


def tokens_lines(tokens: dict) -> list[str]:
    """`tokens per instance: 36`; with several epochs an instance's tokens are those of all its attempts,
    and the mean per attempt is given beside (summaries written before it give the one mean, per row)."""
    if tokens["total_per_instance"] is None:
        return []
    line = f"tokens per instance: {tokens['total_per_instance']:.0f}"
    per_attempt = tokens.get("total_per_attempt")
    if per_attempt is not None and tokens.get("attempts_counted", 0) > tokens["instances_counted"]:
        line += f" over its epochs ({per_attempt:.0f} per attempt)"
    if tokens["instances_missing_usage"]:
        line += f" (usage missing for {tokens['instances_missing_usage']} instances)"
    return [line]


def cost_lines(summary: dict) -> list[str]:
    """Models per role (`--model-role`), tokens per model, and the money cost per correct answer (`--price`)."""
    lines = []
    model = (summary.get("config") or {}).get("model") or {}
    if model.get("models_by_role"):
        lines.append("models per role: " + ", ".join(f"{role} {name}" for role, name in model["models_by_role"].items()))
    by_model = summary.get("tokens_by_model") or {}
    if len(by_model) > 1 or model.get("models_by_role"):
        lines.append("tokens per model: " + ", ".join(f"{name} {part['prompt_tokens'] + part['completion_tokens']}"
                                                     f" ({part['turns']} turns)" for name, part in by_model.items()))
        roles = summary.get("tokens_by_role") or {}
        lines.append("tokens per role: " + ", ".join(f"{role} {part['prompt_tokens'] + part['completion_tokens']}"
                                                    for role, part in roles.items()))
    cost = summary.get("cost") or {}
    table = cost.get("price_table")
    if table:
        shown = "-" if cost.get("per_correct") is None else f"{cost['per_correct']:.4g}"
        lines.append(f"cost {cost['total']:.4g} (prices of {table['date'] or 'the command line'}); per correct answer "
                     f"{shown} {interval_text(cost.get('ci_95'), '.4g')}")
        if cost.get("models_without_price"):
            lines.append(f"COST INCOMPLETE: no price for {', '.join(cost['models_without_price'])}; instances with "
                         "their turns are left out of the cost")
    return lines


def epoch_lines(summary: dict) -> list[str]:
    """The repeats of a run of several epochs, per level and overall."""
    if "epochs" not in summary:
        return []
    ks = list(summary["epochs"]["pass_at_k"])
    lines = [f"{'level':<8}{'epochs':>7}{'mean acc':>9}  {'95% clustered':<16}"
             + "".join(f"{'pass@' + k:>8}" for k in ks) + f"{'majority':>10}{'flip rate':>10}"]
    for level, part in [*((level, part["epochs"]) for level, part in summary["by_level"].items()),
                        ("overall", summary["epochs"])]:
        low, high = part["clustered_95"]
        lines.append(f"{level:<8}{part['epochs']:>7}{part['mean_accuracy']:>9.1%}  [{low:.3f}, {high:.3f}]  "
                     + "".join(f"{part['pass_at_k'].get(k, 0):>8.1%}" for k in ks)
                     + f"{part['majority_accuracy']:>10.1%}{part['flip_rate']:>10.1%}")
    return lines


def team_lines(team: dict | None) -> list[str]:
    """Every agent scored: the team against its best member, and what aggregation lost and fixed."""
    if not team:
        return []
    roles = ", ".join(f"{role} {part['accuracy']:.1%}" for role, part in team["by_role"].items())
    line = (f"team {team['team_accuracy']:.1%}, oracle (some agent's final call right) {team['oracle_accuracy']:.1%}"
            f" of {team['instances']}; lost by aggregation {team['lost_by_aggregation']}, fixed by aggregation "
            f"{team['fixed_by_aggregation']}")
    if "vote_margin" in team:
        line += f"; mean vote margin {team['vote_margin']['mean']:.2f}"
    return [line, f"accuracy per role: {roles}"]


JSON_REPORT_KEY = "apibank"


def add_summary_to_json_report(json_report: dict, summary: dict | None) -> None:
    """pytest-json-report's `pytest_json_modifyreport` body: the run's summary beside the tests' records."""
    if summary is not None:
        json_report[JSON_REPORT_KEY] = summary
