"""The `score` stage, per API: who judges a call that parsed and names the gold API.

Scorers are registered under the API they score. The generic one (`*`) executes the
call after the dialogue's earlier calls in a fresh environment and asks the API's own
`check_api_call_correctness`; an API with a scorer of its own (ToolSearcher, in
`toolsearcher_scorers`) registers it here. Every scorer has the same signature,
`(task, arguments, scorer) -> (correct, error or None, result or None)`, where
`scorer` is the `Scorer` with the run's data root and options; an exception it raises
fails this answer only (the `Scorer` turns it into a wrong answer with the reason).

A registration (`ApiScoring`) also says what the scorer's wrong answers are called
(`wrong`, a `Reason`; default `score:wrong_result`) and what scoring a task may load
slowly (`needs(task, scorer)`: a key, or None; `load(key, scorer)` loads it), so the
`Scorer` asks this table, never an API's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterable

from apibank_bench.apis.environment import Environment
from apibank_bench.core.frozen import thaw
from apibank_bench.core.registry import Entry, Registry
from apibank_bench.scoring.stage import Reason

if TYPE_CHECKING:
    from apibank_bench.data.tasks import Task

#: (correct, error message or None, execution result or None)
Verdict = tuple[bool, "str | None", Any]
ApiScorer = Callable[["Task", dict, Any], Verdict]



@dataclass(frozen=True)
class ApiScoring:
    """One API's scorer and what it needs."""

    score: ApiScorer
    wrong: Reason = Reason.SCORE_WRONG_RESULT  #: what its wrong answers are called
    needs: Callable[[Task, Any], Any] | None = None  #: what scoring a task may load slowly (a key, or None)
    load: Callable[[Any, Any], object] | None = None  #: loads a key `needs` named


GENERIC = "*"
API_SCORERS: Registry[ApiScoring] = Registry("API scorer", "the gold call's API")
# The APIs with scorers of their own register when their module is imported: `scoring.scorer`, which
# sits above them, imports every one (here, a load by name would make an import cycle with them).


def api_scorer(name: str, help: str, *, wrong: Reason = Reason.SCORE_WRONG_RESULT,
               needs: Callable[[Task, Any], Any] | None = None,
               load: Callable[[Any, Any], object] | None = None) -> Callable[[ApiScorer], ApiScorer]:
    """A decorator that registers the scorer it decorates as API `name`'s."""
    def add(score: ApiScorer) -> ApiScorer:
        API_SCORERS.add(name, ApiScoring(score, wrong, needs, load), help)
        return score
    return add


def entry_for(api_name: str) -> Entry[ApiScoring]:
    """The registration of this API's scorer, else the generic one's."""
    return API_SCORERS.entry(api_name if API_SCORERS.has(api_name) else GENERIC)


def scorer_for(api_name: str) -> ApiScorer:
    """The scorer registered for this API, else the generic one."""
    return entry_for(api_name).value.score


def wrong_reason(api_name: str) -> Reason:
    """What a wrong answer at the `score` stage of this API is called."""
    return entry_for(api_name).value.wrong


def slow_loads(tasks: Iterable[Task], scorer: Any) -> list[Callable[[], object]]:
    """What scoring `tasks`' gold APIs may load slowly (an embedding model and the catalog it searches),
    one call per distinct need, in a stable order; empty when nothing is needed."""
    needs: dict[tuple[str, Any], Callable[[Any, Any], object]] = {}
    for task in tasks:
        entry = entry_for(task.gold.api_name)
        need, load = entry.value.needs, entry.value.load
        key = need(task, scorer) if need else None
        if key is not None and load is not None:
            needs.setdefault((entry.name, key), load)
    return [partial(needs[name, key], key, scorer) for name, key in sorted(needs, key=repr)]


@api_scorer(GENERIC, "execute the call after the replayed dialogue; the API's own check "
                               "compares its result with the gold result")
def execute_and_compare(task: Task, arguments: dict, scorer: Any) -> Verdict:
    environment = Environment.for_level(task.level, scorer.root)
    environment.replay(task.prior_api_turns)
    name = task.gold.api_name
    result = environment.call(name, arguments)
    # Checks get copies: some upstream checks pop keys from their inputs.
    correct = bool(environment.tool(name).check_api_call_correctness(thaw(result), thaw(task.gold.result)))
    return correct, None if correct else "API result mismatch", result
