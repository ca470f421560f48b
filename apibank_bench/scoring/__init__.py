"""The three-stage scorer: parse, API name, then execute and compare.

`score(task, answer)` equals the reference harness's `score_prediction` for the
same answer: the answer is parsed (stage `parse`), the API name must equal the
gold name (stage `api_name`), then the dialogue's earlier API calls are replayed
in a fresh environment, the predicted call is executed, and the API's own
`check_api_call_correctness` compares it with the recorded gold result (stage
`score`). ToolSearcher gold calls go to the ToolSearcher scorers instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from apibank_bench.apis.environment import Environment
from apibank_bench.core.frozen import thaw
from apibank_bench.scoring.parsing import ParseError, parse_call
from apibank_bench.core.paths import require_root
from apibank_bench.data.tasks import Task, render_call
from apibank_bench.scoring.toolsearcher_scorers import SCORERS, default_scorer, score_toolsearcher, searched_catalog


@dataclass(frozen=True)
class Score:
    correct: bool
    stage: str  #: "parse", "api_name" or "score": the last stage the answer reached ("error": no answer)
    error: str | None
    api_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None

    @property
    def predicted_call(self) -> str | None:
        return None if self.api_name is None else render_call(self.api_name, self.arguments)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Scorer:
    """Scores answers for tasks of one data root. Thread-safe: every call builds its own environment."""

    def __init__(self, root: str | Path | None = None, toolsearcher_scorer: str | None = None) -> None:
        self.root = require_root(root)
        name = (toolsearcher_scorer or "").strip().lower()
        self.toolsearcher_scorer = SCORERS.entry(name).name if name else None

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
            return Score(False, "parse", _describe(exc))

        name, arguments = call.name, call.arguments
        if name != task.gold.api_name:
            return Score(False, "api_name", f"API name mismatch: {name} != {task.gold.api_name}", name, arguments)

        if name == "ToolSearcher":
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
