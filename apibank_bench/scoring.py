"""The three-stage scorer: parse, API name, then execute and compare.

`score(task, answer)` equals the reference harness's `score_prediction` for the
same answer: the answer is parsed (stage `parse`), the API name must equal the
gold name (stage `api_name`), then the dialogue's earlier API calls are replayed
in a fresh environment, the predicted call is executed, and the API's own
`check_api_call_correctness` compares it with the recorded gold result (stage
`score`). ToolSearcher gold calls go to the ToolSearcher scorers instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .environment import Environment
from .frozen import thaw
from .parsing import ParseError, parse_call
from .paths import require_root
from .tasks import Task, render_call

TOOLSEARCHER_SCORERS = ("official", "upstream", "keyword")
_SCORER_ALIASES = {"official_frozen": "official", "frozen": "official", "raw": "upstream"}


def default_toolsearcher_scorer(level: str) -> str:
    """The reference's default: `keyword` for Level 1, `official` for the rest."""
    return "keyword" if str(level) == "1" else "official"


def normalize_toolsearcher_scorer(name: str | None) -> str | None:
    if name is None or name == "":
        return None
    key = _SCORER_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in TOOLSEARCHER_SCORERS:
        raise ValueError(f"unknown ToolSearcher scorer {name!r}; expected one of {', '.join(TOOLSEARCHER_SCORERS)}")
    return key


@dataclass(frozen=True)
class Score:
    correct: bool
    stage: str  #: "parse", "api_name" or "score": the last stage the answer reached
    error: str | None
    api_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None

    @property
    def predicted_call(self) -> str | None:
        return None if self.api_name is None else render_call(self.api_name, self.arguments)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Scorer:
    """Scores answers for tasks of one data root. Thread-safe: every call builds its own environment."""

    def __init__(self, root: str | Path | None = None, toolsearcher_scorer: str | None = None) -> None:
        self.root = require_root(root)
        self.toolsearcher_scorer = normalize_toolsearcher_scorer(toolsearcher_scorer)

    def toolsearcher_scorer_for(self, task: Task) -> str:
        return self.toolsearcher_scorer or default_toolsearcher_scorer(task.level)

    def score(self, task: Task, answer: str | None) -> Score:
        try:
            call = parse_call(answer)
        except ParseError as exc:
            return Score(False, "parse", _describe(exc))

        name, arguments = call.name, call.arguments
        if name != task.gold.api_name:
            return Score(False, "api_name", f"API name mismatch: {name} != {task.gold.api_name}", name, arguments)

        if name == "ToolSearcher":
            from .toolsearch import score_toolsearcher

            try:
                correct, error, result = score_toolsearcher(task, arguments, self.toolsearcher_scorer_for(task),
                                                            self.root)
            except Exception as exc:  # as the reference: a failed search (even a missing model) scores 0, with why
                return Score(False, "score", _describe(exc), name, arguments)
            return Score(correct, "score", error, name, arguments, result)

        try:
            environment = Environment.for_level(task.level, self.root)
            environment.replay(task.prior_api_turns)
            result = environment.call(name, arguments)
            # Checks get copies: some upstream checks pop keys from their inputs.
            correct = bool(environment.tool(name).check_api_call_correctness(thaw(result), thaw(task.gold.result)))
        except Exception as exc:  # an API or check failing on this answer fails this answer only
            return Score(False, "score", _describe(exc), name, arguments)
        return Score(correct, "score", None if correct else "API result mismatch", name, arguments, result)

    def gold_replay(self, task: Task) -> Score:
        """Score the task's own gold call: a self-check of the data and the environment."""
        return self.score(task, task.gold_call)


def score(task: Task, answer: str | None, *, root: str | Path | None = None,
          toolsearcher_scorer: str | None = None) -> Score:
    return Scorer(root, toolsearcher_scorer).score(task, answer)
