"""The `score` stage, per API: who judges a call that parsed and names the gold API.

Scorers are registered under the API they score. The generic one (`*`) executes the
call after the dialogue's earlier calls in a fresh environment and asks the API's own
`check_api_call_correctness`; an API with a scorer of its own (ToolSearcher, in
`toolsearcher_scorers`) registers it here. Every scorer has the same signature,
`(task, arguments, scorer) -> (correct, error or None, result or None)`, where
`scorer` is the `Scorer` with the run's data root and options; an exception it raises
fails this answer only (the `Scorer` turns it into a wrong answer with the reason).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from apibank_bench.apis.environment import Environment
from apibank_bench.core.frozen import thaw
from apibank_bench.core.registry import Registry

if TYPE_CHECKING:
    from apibank_bench.data.tasks import Task

#: (correct, error message or None, execution result or None)
Verdict = tuple[bool, "str | None", Any]
ApiScorer = Callable[["Task", dict, Any], Verdict]

GENERIC = "*"
API_SCORERS: Registry[ApiScorer] = Registry("API scorer", "the gold call's API")


def scorer_for(api_name: str) -> ApiScorer:
    """The scorer registered for this API, else the generic one."""
    return API_SCORERS.get(api_name if API_SCORERS.has(api_name) else GENERIC)


@API_SCORERS.register(GENERIC, "execute the call after the replayed dialogue; the API's own check "
                               "compares its result with the gold result")
def execute_and_compare(task: Task, arguments: dict, scorer: Any) -> Verdict:
    environment = Environment.for_level(task.level, scorer.root)
    environment.replay(task.prior_api_turns)
    name = task.gold.api_name
    result = environment.call(name, arguments)
    # Checks get copies: some upstream checks pop keys from their inputs.
    correct = bool(environment.tool(name).check_api_call_correctness(thaw(result), thaw(task.gold.result)))
    return correct, None if correct else "API result mismatch", result
