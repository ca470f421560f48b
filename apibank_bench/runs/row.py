"""One line of `results.jsonl`, typed: every writer builds a `ResultRow`, every reader gets one.

The JSON is what it always was, key for key and in the same order: the columns every row has
(`id` ... `gold_call`), then the optional fields that have a value, in the order declared here, then
`schema_version` (runs.versions; the JSON Schema generated from these fields: runs.schemas).
Adding a field is adding an optional one below, with its default: older files read as before
(a row written before epochs is epoch 0), and rows that never set it are written as before.

Absent and null are different facts for some optional fields (`prompt_tokens: null`: the endpoint
reported no usage; `vote_margin: null`: a vote nobody won; absent: no model call, no vote), so
a new row writes as null the optional fields it was given as None (`nulls`). A row read from a
file remembers that file's keys in their order (`layout`), its unknown keys included (a newer
version's field, the `<key>_truncated` notes of a cut string, `extra`): written back, it is the
line it was read from.

In Python the stage is a `Stage`, the reason a `Reason` and `answered_by` an `AnsweredBy`; in JSON plain strs (xdist's channel serializes
no enum). A reason code this version does not know (a newer version's) is kept as the str it read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from apibank_bench.scoring.answered_by import AnsweredBy
from apibank_bench.runs.versions import RESULTS_ROW, WRITES, upgraded
from apibank_bench.scoring.stage import Reason, Stage

_COLUMN = {"column": True}  #: written in every row, null or not (readers may rely on the key)


def _hidden(default_factory) -> Any:
    """A field of the row's JSON form (how it is written), not of what it says: left out of ==."""
    return field(default_factory=default_factory, compare=False, repr=False)


@dataclass(frozen=True)
class ResultRow:
    id: str
    epoch: int = field(default=0, metadata=_COLUMN)  #: runs.epochs; rows written before epochs are epoch 0
    level: str | None = field(default=None, metadata=_COLUMN)
    correct: bool = field(default=False, metadata=_COLUMN)  #: the scorer's verdict (see `is_correct`)
    stage: Stage | None = field(default=None, metadata=_COLUMN)  #: how far the answer got (`Stage.ERROR`: none)
    error: str | None = field(default=None, metadata=_COLUMN)
    predicted_call: str | None = field(default=None, metadata=_COLUMN)
    gold_call: str | None = field(default=None, metadata=_COLUMN)
    reason: Reason | str | None = None  #: why it is not correct, as a code (scoring.stage.Reason); absent when correct
    # What solving the instance took; rows of `apibank-bench score` (saved answers) have none of it.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    model_calls: int | None = None
    agent_answers: list | None = None  #: a team's agents' final answers, one per agent turn
    #: the path the scored answer came through: `tool_call`, `client_parse`, `text`, `text_fallback` or `none`
    #: (scoring.answered_by.AnsweredBy); absent when no agent answered (the gold self-check, `score`)
    answered_by: AnsweredBy | str | None = None
    # A team's agents scored (runs.team).
    agents_correct: list[dict] | None = None  #: per scored turn: role, round, index, correct, stage
    oracle: bool | None = None  #: some agent's final call is correct
    vote_margin: int | None = None  #: votes for the winner minus the runner-up's (voting teams)
    agents_error: str | None = None  #: why the agents could not be scored (the team's verdict stands)
    #: the row's form (runs.versions): the last key of a row this release writes; a row read from a line
    #: without it (written before versions) is version 1's form and is written back without it
    schema_version: int = field(default=WRITES[RESULTS_ROW], metadata=_COLUMN)
    # -- the JSON form -------------------------------------------------------------------------
    nulls: frozenset[str] = _hidden(frozenset)  #: optional fields written as null (see the docstring)
    layout: tuple[str, ...] = _hidden(tuple)  #: the keys of the line it was read from, in order
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  #: keys this version does not know, as read

    def __post_init__(self) -> None:
        if self.stage is not None and not isinstance(self.stage, Stage):
            object.__setattr__(self, "stage", Stage(self.stage))
        if self.reason is not None and not isinstance(self.reason, Reason):
            object.__setattr__(self, "reason", _reason(self.reason))
        if self.answered_by is not None and not isinstance(self.answered_by, AnsweredBy):
            object.__setattr__(self, "answered_by", _known(AnsweredBy, self.answered_by))

    @property
    def is_error(self) -> bool:
        """An infrastructure failure (endpoint, timeout, crash): not an answer, never correct."""
        return self.stage == Stage.ERROR

    @property
    def is_correct(self) -> bool:
        return bool(self.correct) and not self.is_error

    @property
    def key(self) -> tuple[str, int]:
        """What identifies the row in a run: its instance and epoch (runs.epochs)."""
        return self.id, int(self.epoch or 0)

    def _written(self, spec: dataclasses.Field) -> bool:
        value = getattr(self, spec.name)
        if self.layout:  # the keys it was read with, and any field given a value since (dataclasses.replace)
            return spec.name in self.layout or (value is not None and value != spec.default)
        return value is not None or spec.name in self.nulls or bool(spec.metadata.get("column"))

    def to_json(self) -> dict[str, Any]:
        """The row as results.jsonl holds it: plain JSON values, in the file's order (see the docstring)."""
        line = {spec.name: getattr(self, spec.name) for spec in _FIELDS if self._written(spec)}
        for key in ("stage", "reason", "answered_by"):  # plain str in JSON
            if line.get(key) is not None:
                line[key] = str(line[key])
        line.update(self.extra)
        if not self.layout:
            return line
        place = {key: index for index, key in enumerate(self.layout)}
        return dict(sorted(line.items(), key=lambda item: place.get(item[0], len(place))))  # a stable sort

    @classmethod
    def from_json(cls, line: dict[str, Any], source: str = "a results row") -> ResultRow:
        """A results.jsonl line (a dict) as a row; every key of it is kept, in place. A line of a version
        this release does not read is refused by name (runs.versions.UnsupportedSchemaVersion, naming
        `source`: the file and line)."""
        line = upgraded(line, RESULTS_ROW, source)
        known = {name: line[name] for name in _NAMES if name in line}
        extra = {key: value for key, value in line.items() if key not in _NAMES}
        return cls(**known, layout=tuple(line), extra=extra)


_FIELDS = [spec for spec in dataclasses.fields(ResultRow) if spec.name not in ("nulls", "layout", "extra")]
_NAMES = frozenset(spec.name for spec in _FIELDS)


def _reason(code: str) -> Reason | str:
    return _known(Reason, code)


def _known(kind, code: str):
    """`code` as a member of the enum `kind`, or the str it is when this version does not know it."""
    try:
        return kind(code)
    except ValueError:
        return code
