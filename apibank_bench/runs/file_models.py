"""The result files' typed models: what `predictions.jsonl` lines, `summary.json`, `run.json` and the
traces hold (a `results.jsonl` line is `runs.row.ResultRow`, a trace's agent turn `agents.turn.AgentTurn`).

They are TypedDicts: the files are JSON objects that about a hundred places read by key, and a
TypedDict types those dicts without changing them (the JSON written is what it was, plus
`schema_version`: runs.versions). The JSON Schemas shipped in `apibank_bench/schemas/` are generated
from these declarations (runs.schemas); the tests validate real files against them, so a field
written but not declared here fails a test. A field's comment is its description for consumers.

Declared here and nowhere else: a new field of a file is a new key below (additive: no new version).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Truncated(TypedDict):
    """Beside a string cut to 64 Ki characters (`<key>_truncated`): the whole string's length and hash."""

    length: int
    sha256: str  #: of the whole string's UTF-8 bytes


class PredictionLine(TypedDict):
    """One line of predictions.jsonl: an instance's raw answer, before scoring."""

    id: str  #: the instance (`level-1::...`)
    epoch: int  #: which repeat (runs.epochs); 0 in a run of one epoch
    prediction: str | None  #: the answer as the model (or the team's final agent) gave it
    predicted_call: str | None  #: the call the scorer parsed from it, None when none parsed
    prediction_truncated: NotRequired[Truncated]
    predicted_call_truncated: NotRequired[Truncated]
    schema_version: int


class Accuracy(TypedDict):
    """Accuracy of a group of rows (runs.summary.accuracy): the run, one level, one API."""

    total: int  #: instances
    attempts: int  #: rows (instances x epochs)
    correct: int  #: correct rows
    accuracy: float  #: correct rows over all rows (an error row counts against it)
    errors: int  #: error rows (no answer: endpoint, timeout, crash)
    completed: int  #: rows with an answer
    accuracy_completed: float | None  #: correct rows over completed ones
    wilson_95: list[float]  #: 95 % Wilson interval (on the effective n of instances with several epochs)
    flags: list[str]  #: `small_n` (fewer than 20 instances), `errors`
    epochs: NotRequired[dict[str, Any]]  #: several epochs: mean accuracy, pass@k, majority, flip rate


class Tokens(TypedDict):
    prompt_tokens: int
    completion_tokens: int


class TokensPerInstance(TypedDict):
    instances_counted: int
    instances_missing_usage: int  #: made model calls without reported usage (never counted as zero)
    prompt_tokens: int
    completion_tokens: int
    prompt_per_instance: float | None  #: with epochs, of all an instance's attempts (its rows)
    completion_per_instance: float | None
    total_per_instance: float | None
    attempts_counted: NotRequired[int]  #: rows with usage (with one epoch, the instances counted)
    attempts_missing_usage: NotRequired[int]
    total_per_attempt: NotRequired[float | None]  #: the mean per row


class TurnTokens(TypedDict):
    """Agent turns of one role or one model, and their tokens."""

    turns: int
    turns_missing_usage: int
    prompt_tokens: int
    completion_tokens: int


class TokensPerCorrect(TypedDict):
    tokens_per_correct: float | None  #: tokens over correct answers (None: none correct)
    ci_95: list[float | None] | None  #: bootstrap interval resampling instances (a high of None: unbounded)
    tokens: int
    correct: int
    instances: int
    rows_missing_usage: NotRequired[int]  #: the run's value only: rows left out, usage unknown


class CacheUse(TypedDict):
    model_calls: int  #: agent turns in the traces
    answered_by_cache: int  #: turns the response cache answered (no request sent)


class Selection(TypedDict):
    """The selection as made. Counts are of cases (an instance in one epoch: runs.epochs), but `instances`."""

    cases: NotRequired[int]  #: cases selected by the settings
    instances: int  #: instances selected by the settings (written before `cases`: the cases)
    epochs: NotRequired[int]
    finished_before: NotRequired[int]  #: skipped by a resume (finished already)
    deselected: NotRequired[int]  #: not run on purpose (`-k`, `--deselect`, `--lf`)
    deselected_without_row: NotRequired[int]  #: of those, the cases the folder holds no row of (not `complete`)
    pytest: NotRequired[dict[str, Any]]  #: the pytest options that narrowed the selection
    other_selection: NotRequired[list[str]]  #: narrowed into the folder of a run with another selection: how


class Forced(TypedDict):
    at: str  #: when the run was continued with `--force` (ISO 8601, UTC)
    differences: list[str]  #: the measured settings that differed, one phrase each


class Summary(TypedDict):
    """summary.json: the run's statistics, its settings and provenance (`config`), and how it went."""

    schema_version: int
    total: int  #: instances
    attempts: int  #: rows (instances x epochs)
    correct: int
    accuracy: float
    errors: int
    completed: int
    accuracy_completed: float | None
    wilson_95: list[float]
    flags: list[str]
    by_level: dict[str, Accuracy]
    by_api: dict[str, Accuracy]  #: per gold call's API name
    failures_by_stage: dict[str, int]  #: parse, api_name, score, error
    failures_by_reason: dict[str, int]  #: reason codes (scoring.stage.Reason), most frequent first
    tokens: Tokens
    tokens_per_instance: TokensPerInstance
    tokens_by_role: dict[str, TurnTokens]
    tokens_by_model: dict[str, TurnTokens]
    tokens_per_correct: TokensPerCorrect
    tokens_per_correct_by_role: dict[str, TokensPerCorrect]
    cache: CacheUse
    argument_type: int  #: rows failing only on an argument's JSON type (reason `score:argument_type`)
    answered_by: NotRequired[dict[str, Any]]  #: agents' answers: the path each came through (`rows`, `turns`)
    epochs: NotRequired[dict[str, Any]]  #: several epochs: mean accuracy, pass@k, majority, flip rate
    correct_epochs: NotRequired[dict[str, int]]  #: several epochs: correct epochs per instance
    team: NotRequired[dict[str, Any]]  #: a team run: team vs oracle accuracy, per role, aggregation (runs.team)
    cost: NotRequired[dict[str, Any]]  #: with traces: cost in money (a price table) or tokens (runs.cost)
    selected: NotRequired[int]  #: cases selected
    not_run: NotRequired[int]  #: selected cases without a row, less those deselected on purpose
    complete: bool  #: a finished row (no error) for every selected case, deselected by pytest or not
    wall_time_s: NotRequired[float]  #: a resumed run's includes its earlier parts
    config: NotRequired[dict[str, Any]]  #: `run`: the settings; `model`, `provenance`, `packages`, `git_revision`
    unreadable_lines: int  #: results.jsonl lines that could not be read (set aside in results.jsonl.unreadable)
    endpoints: NotRequired[dict[str, Any]]  #: requests per endpoint URL (llm.router)
    selection: NotRequired[Selection]
    forced: NotRequired[list[Forced]]
    answers_at_max_tokens: NotRequired[dict[str, int]]  #: the model's answers, and those cut at max_tokens
    closed_connections: NotRequired[dict[str, int]]  #: connections the server closed, and the in-flight limit
    stopped: NotRequired[str]  #: why the run stopped early (the circuit breaker, -x)
    gate: NotRequired[dict[str, Any]]  #: `--baseline`: the regression gate's verdict (reports.gate)
    merged_from: NotRequired[list[str]]  #: `merge`: the shard folders joined


class RunRecord(TypedDict):
    """run.json: the settings of the folder's run, written with its first row."""

    schema_version: int
    settings: dict[str, Any]  #: every setting of the settings table, by name (core.settings.RunConfig)
    started_at: str  #: ISO 8601, UTC
    forced: list[Forced]  #: continuations with other measured settings (`--force`)
    merged_from: NotRequired[list[str]]  #: `merge`: the shard folders joined
    #: the sha256 of the embedded model's GGUF the run served (none for a remote model): a resumed run must
    #: serve the same file (runs.folder.decide)
    model_sha256: NotRequired[str]


class Vote(TypedDict):
    rule: str
    keys: list[str | None]  #: each agent's vote key
    tally: list[list[Any]]  #: [key, votes], in first-seen order
    winner: int | None  #: the winning agent's index, None when nobody won


class Trace(TypedDict):
    """traces/<id>.json: everything one instance's solving said and cost."""

    schema_version: int
    id: str
    epoch: int
    gold_call: str
    result: dict[str, Any]  #: the instance's results.jsonl row (runs.row.ResultRow; its schema in the file's)
    agents: NotRequired[list[dict[str, Any]]]  #: every agent turn, in order (agents.turn.AgentTurn's written fields)
    vote: NotRequired[Vote]  #: a voting team's vote
    solver: NotRequired[str]  #: the gold self-check names itself
    traceback: NotRequired[str]  #: a solver crash's traceback (redacted)
