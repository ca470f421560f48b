"""How far an answer got, and why it failed: the scorer's three stages (`error` for an instance with no
answer), and a failure's reason code.

Both are `StrEnum`s, so they are written to JSON, compared and formatted as their plain names
(`"parse"`, `"parse:no_call"`), exactly as the results files spell them. A reason code is
`<stage>:<what>`, after BFCL's `error_type` (`simple_function_checker:wrong_func_name`): short and
stable, so failures can be counted and compared across runs, beside the row's free-text `error`.
A correct answer has no reason.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    PARSE = "parse"  #: the answer held no bracketed keyword call that parses
    API_NAME = "api_name"  #: the call parsed but named another API than the gold call
    SCORE = "score"  #: the call was executed and checked against the gold result (correct or not)
    ERROR = "error"  #: no answer to score: the endpoint, the solver or the scorer failed, or time ran out


class Reason(StrEnum):
    """Why an answer is not correct (scoring.parsing, scoring.scorer), or why there was none (runs.instances)."""

    PARSE_EMPTY = "parse:empty"  #: no answer text at all (a team whose vote nobody won, a blank answer)
    PARSE_NO_CALL = "parse:no_call"  #: text, but no `[ApiName(...)]` span in it
    PARSE_SYNTAX = "parse:syntax"  #: the chosen span is not a Python call
    PARSE_POSITIONAL = "parse:positional"  #: a call with a positional argument
    PARSE_KWARGS = "parse:kwargs"  #: a call with `**kwargs`
    PARSE_VALUE = "parse:value"  #: an argument that is not a literal (`x=f()`)
    # A function-calling agent's tool call that cannot be its answer (agents.tool_answer); the text was read instead
    # and held no call. `parse:tool_in_text`: the text holds a tool call that `--tool-parse server` does not read.
    PARSE_TOOL_ARGUMENTS = "parse:tool_arguments"  #: a tool call whose arguments are not a JSON object
    PARSE_TOOL_UNKNOWN = "parse:tool_unknown"  #: a call to a tool that is no API of the task's level
    PARSE_TOOL_SCHEMA = "parse:tool_schema"  #: arguments the tool's schema does not declare
    PARSE_TOOL_IN_TEXT = "parse:tool_in_text"  #: a tool call left in the text, under `--tool-parse server`
    API_NAME_MISMATCH = "api_name:mismatch"  #: an existing API, not the gold call's
    API_NAME_UNKNOWN = "api_name:unknown_api"  #: a name that is no API of API-Bank
    SCORE_WRONG_RESULT = "score:wrong_result"  #: executed; the API's own check says its result is not the gold's
    SCORE_API_EXCEPTION = "score:api_exception"  #: executing or checking the call raised (a missing argument ...)
    SCORE_SEARCH_MISS = "score:search_miss"  #: a search API's scorer found other results than the gold's
    #: the API's own check failed, and the arguments differ from the gold's only in JSON type (`'100'` for `100`)
    SCORE_ARGUMENT_TYPE = "score:argument_type"
    ERROR_TIMEOUT = "error:timeout"  #: a model request timed out (after its retries)
    ERROR_CONTEXT_LENGTH = "error:context_length"  #: the prompt did not fit the server's context
    ERROR_ENDPOINT = "error:endpoint"  #: the endpoint failed otherwise: connection, HTTP status, malformed answer
    ERROR_MODEL = "error:model"  #: a model error of another kind (an agent SDK's own failure)
    ERROR_INTERRUPTED = "error:interrupted"  #: the run stopped (circuit breaker, abandoned) while it was asked
    ERROR_TIME_LIMIT = "error:time_limit"  #: the instance ran over --apibank-instance-timeout
    ERROR_SOLVER_CRASH = "error:solver_crash"  #: the solver raised (a harness bug)
    ERROR_SCORER_CRASH = "error:scorer_crash"  #: the scorer raised (a harness bug)
    ERROR_WORKER_CRASH = "error:worker_crash"  #: the test process running it died (xdist)
    ERROR_CUT_ANSWER = "error:cut_answer"  #: `score`: the stored answer was cut, the whole one is not in the file

    @property
    def stage(self) -> Stage:
        return Stage(self.value.partition(":")[0])


def model_error_reason(failure: str | None) -> Reason:
    """The reason code of a model error of kind `failure` (llm.failure.Failure, named where the request
    failed; None: a kind the model layer did not name, such as an agent SDK's own failure)."""
    return Reason(f"{Stage.ERROR}:{failure}") if failure else Reason.ERROR_MODEL
