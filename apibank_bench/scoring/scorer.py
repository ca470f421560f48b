"""The three-stage scorer: parse, API name, then the `score` stage of the API's own scorer.

`score(task, answer)` equals the reference harness's `score_prediction` for the
same answer: the answer is parsed (stage `parse`), the API name must equal the
gold name (stage `api_name`), then the scorer registered for that API judges the
call (stage `score`; `api_scorers`): for most APIs the dialogue's earlier calls
are replayed in a fresh environment, the predicted call is executed, and the
API's own `check_api_call_correctness` compares it with the recorded gold
result; APIs with scorers of their own register them in `api_scorers`.
A wrong answer's `reason` (scoring.stage.Reason) says why in a code; a call whose arguments differ
from the gold's only in JSON type is `score:argument_type` (scoring.argument_types), its verdict unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from apibank_bench.core.paths import require_root
from apibank_bench.data import specs
from apibank_bench.data.tasks import Task, render_call
from apibank_bench.scoring.argument_types import type_only_difference
from apibank_bench.scoring.api_scorers import scorer_for, slow_loads, wrong_reason
from apibank_bench.scoring.prediction import Prediction
from apibank_bench.scoring.stage import Reason, Stage
from apibank_bench.scoring.toolsearcher_scorers import option_value  # (importing it registers its API scorers)


@dataclass(frozen=True)
class Score:
    correct: bool
    stage: Stage  #: the last stage the answer reached (`Stage.ERROR`: there was no answer)
    error: str | None
    api_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    reason: Reason | None = None  #: why it is not correct (None: it is)

    @property
    def predicted_call(self) -> str | None:
        return None if self.api_name is None else render_call(self.api_name, self.arguments)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _type_slip(arguments: dict[str, Any], task: Task) -> Reason | None:
    """`score:argument_type` when the arguments differ from the gold's only in JSON type (the verdict stays
    the API's own: this only names the failure)."""
    return Reason.SCORE_ARGUMENT_TYPE if type_only_difference(arguments, task.gold.params) else None


def _is_api(name: str, level: str) -> bool:
    """Whether `name` is an API of the API set of a Level-`level` task."""
    return name in specs.specs(specs.api_set_for_level(level))


class Preload:
    """Loads, one after another, in a thread of its own, what scoring may need (`Scorer.preload`).

    The thread is not a daemon: a daemon thread still loading (inside onnx, tokenizers or numpy) when the
    interpreter ends is cut off in native code, which can abort the process after the run has finished
    (exit 134, `FATAL: exception not rethrown`). The interpreter waits for this one instead, and `stop()`
    skips the loads not yet started, so a run that ends first waits for one load at most."""

    def __init__(self, loads: list[Callable[[], object]]) -> None:
        self._loads = loads
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._load, name="apibank-scorer-preload")

    def start(self) -> Preload:
        self._thread.start()
        return self

    def _load(self) -> None:
        for each in self._loads:
            if self._stopped.is_set():
                return
            try:
                each()
            except Exception:  # noqa: BLE001 - the scoring that needs it reports why (e.g. ModelUnavailable)
                pass

    def stop(self) -> None:
        """Start no further load and wait for the one under way."""
        self._stopped.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


class Scorer:
    """Scores answers for tasks of one data root. Thread-safe: every call builds its own environment."""

    def __init__(self, root: str | Path | None = None, toolsearcher_scorer: str | None = None) -> None:
        self.root = require_root(root)
        self.toolsearcher_scorer = option_value(toolsearcher_scorer)  #: the run's setting (None: the level's default)

    def preload(self, tasks: Iterable[Task]) -> Preload | None:
        """Start loading, in a background thread, what the API scorers of `tasks` may load slowly
        (api_scorers.slow_loads: the embedding model and catalogs a search scorer embeds with), so that the first
        such scoring does not wait seconds for it. None: nothing to load. The caller `stop()`s it when its
        run ends."""
        loads = slow_loads(tasks, self)
        return Preload(loads).start() if loads else None

    def score(self, task: Task, answer: str | None | Prediction) -> Score:
        """Score an answer (its text, or a `Prediction`: parsed already)."""
        prediction = answer if isinstance(answer, Prediction) else Prediction.of(answer)
        call = prediction.call
        if call is None:
            assert prediction.error is not None
            return Score(False, Stage.PARSE, describe(prediction.error), reason=prediction.error.reason)

        name, arguments = call.name, call.arguments
        if name != task.gold.api_name:
            reason = Reason.API_NAME_MISMATCH if _is_api(name, task.level) else Reason.API_NAME_UNKNOWN
            return Score(False, Stage.API_NAME, f"API name mismatch: {name} != {task.gold.api_name}", name, arguments,
                         reason=reason)

        try:
            correct, error, result = scorer_for(name)(task, arguments, self)
        except Exception as exc:  # as the reference: an API, check or search failing on this answer fails it only
            return Score(False, Stage.SCORE, describe(exc), name, arguments,
                         reason=_type_slip(arguments, task) or Reason.SCORE_API_EXCEPTION)
        wrong = None if correct else _type_slip(arguments, task) or wrong_reason(name)
        return Score(correct, Stage.SCORE, error, name, arguments, result, wrong)

    def gold_replay(self, task: Task) -> Score:
        """Score the task's own gold call: a self-check of the data and the environment."""
        return self.score(task, task.gold_call)
