"""The three-stage scorer: parse, API name, then the `score` stage of the API's own scorer.

`score(task, answer)` equals the reference harness's `score_prediction` for the
same answer: the answer is parsed (stage `parse`), the API name must equal the
gold name (stage `api_name`), then the scorer registered for that API judges the
call (stage `score`; `api_scorers`): for most APIs the dialogue's earlier calls
are replayed in a fresh environment, the predicted call is executed, and the
API's own `check_api_call_correctness` compares it with the recorded gold
result; ToolSearcher has scorers of its own (`toolsearcher_scorers`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from apibank_bench.core.paths import require_root
from apibank_bench.data.tasks import Task, render_call
from apibank_bench.scoring.api_scorers import scorer_for
from apibank_bench.scoring.parsing import ParseError, parse_call
from apibank_bench.scoring.stage import Stage
# (importing it also registers ToolSearcher's API scorer)
from apibank_bench.scoring.toolsearcher_scorers import SCORERS, default_scorer, searched_catalog


@dataclass(frozen=True)
class Score:
    correct: bool
    stage: Stage  #: the last stage the answer reached (`Stage.ERROR`: there was no answer)
    error: str | None
    api_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None

    @property
    def predicted_call(self) -> str | None:
        return None if self.api_name is None else render_call(self.api_name, self.arguments)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Scorer:
    """Scores answers for tasks of one data root. Thread-safe: every call builds its own environment."""

    def __init__(self, root: str | Path | None = None, toolsearcher_scorer: str | None = None) -> None:
        self.root = require_root(root)
        name = (toolsearcher_scorer or "").strip().lower()
        self.toolsearcher_scorer = SCORERS.entry(name).name if name else None  #: None: the level's default

    def toolsearcher_scorer_for(self, task: Task) -> str:
        return self.toolsearcher_scorer or default_scorer(task.level)

    def preload(self, tasks: Iterable[Task]) -> threading.Thread | None:
        """Load, in a background thread, the embedding model and catalogs that scoring `tasks` may need
        (a predicted ToolSearcher call whose keywords were never recorded is searched by embedding),
        so that the first such scoring does not wait seconds for the model. None: nothing to load."""
        catalogs = sorted({(self.toolsearcher_scorer_for(task), task.level) for task in tasks
                           if task.gold.api_name == "ToolSearcher"
                           and SCORERS.entry(self.toolsearcher_scorer_for(task)).extra.get("searches")})
        if not catalogs:
            return None

        def load() -> None:
            try:
                for scorer, level in catalogs:
                    searched_catalog(scorer, level, self.root).embeddings()
            except Exception:  # noqa: BLE001 - the scoring that needs it reports why (e.g. ModelUnavailable)
                pass

        thread = threading.Thread(target=load, name="apibank-toolsearcher-preload", daemon=True)
        thread.start()
        return thread

    def score(self, task: Task, answer: str | None) -> Score:
        try:
            call = parse_call(answer)
        except ParseError as exc:
            return Score(False, Stage.PARSE, describe(exc))

        name, arguments = call.name, call.arguments
        if name != task.gold.api_name:
            return Score(False, Stage.API_NAME, f"API name mismatch: {name} != {task.gold.api_name}", name, arguments)

        try:
            correct, error, result = scorer_for(name)(task, arguments, self)
        except Exception as exc:  # as the reference: an API, check or search failing on this answer fails it only
            return Score(False, Stage.SCORE, describe(exc), name, arguments)
        return Score(correct, Stage.SCORE, error, name, arguments, result)

    def gold_replay(self, task: Task) -> Score:
        """Score the task's own gold call: a self-check of the data and the environment."""
        return self.score(task, task.gold_call)
