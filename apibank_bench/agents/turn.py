"""One agent turn, typed: what an agent saw, said and cost, and its answer parsed once.

A turn stays an `AgentTurn` until the instance's trace is written (`Solution.to_trace`); the vote,
the team's score and each agent's score read it, and its `to_dict` is the trace file's form.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from apibank_bench.scoring.parsing import ParseError
from apibank_bench.scoring.prediction import Prediction
from apibank_bench.scoring.stage import Reason

#: Parse failures that mean "no call in the text": a tool call's own reason, when it has one, says more.
_NO_CALL = (Reason.PARSE_EMPTY, Reason.PARSE_NO_CALL)


@dataclass
class AgentTurn:
    """One model call of one agent: what it saw, what it said, what it cost."""

    role: str
    messages: list[dict[str, str]]
    round: int = 0  #: the step it spoke in: debate round, pipeline stage, 1 for a manager (0 elsewhere)
    index: int = 0  #: the agent's place in its team; orders turns and breaks ties
    answer: str = ""
    call: str | None = None  #: the parsed call in canonical text form (vote.canonical_call), None if it did not parse
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None  #: why the model stopped ("length": at max_tokens)
    error: str | None = None
    failure: str | None = None  #: `error`'s kind (llm.failure.Failure), from the request that failed; not written
    emits_call: bool = True  #: False for a free-text turn (a delegation): not scored as a call
    model: str = ""  #: the model that answered (its role's, `--model-role`; else `--model`)
    tool_calls: list[dict[str, str]] = field(default_factory=list)  #: an SDK agent's tool calls ({name, arguments})
    answered_by: str | None = None  #: the path its answer came through (scoring.answered_by.AnsweredBy)
    tool_reason: str | None = None  #: why a tool call it offered was not its answer (a parse-stage Reason)
    text_tool_call: dict[str, Any] | None = None  #: the tool call the client read in its text (agents.tool_text)
    #: `answer` parsed once (`submitted`): the vote, the team's score and each agent's score read it; not written
    prediction: Prediction | None = field(default=None, compare=False, repr=False)

    def submitted(self) -> Prediction:
        """What the turn submits (its chosen bracketed call, else its answer trimmed), parsed once per answer."""
        if self.prediction is None or self.prediction.answer != self.answer:
            prediction = Prediction.submitted(self.answer)
            if self.tool_reason and prediction.error is not None and prediction.error.reason in _NO_CALL:
                reason = Reason(self.tool_reason)
                prediction = Prediction(prediction.answer, prediction.text, None,
                                        ParseError(f"no usable tool call ({reason}) and no call in the text", reason))
            self.prediction = prediction
        return self.prediction

    def to_dict(self) -> dict[str, Any]:
        """The turn as its trace holds it (`prediction` aside: the trace holds the answer and the call)."""
        return {name: _plain(copy.deepcopy(getattr(self, name))) for name in _WRITTEN}


def _plain(value: Any) -> Any:
    """An enum member as its plain str (a trace crosses xdist's channel, which takes no enum)."""
    return str(value) if isinstance(value, StrEnum) else value


_WRITTEN = tuple(spec.name for spec in fields(AgentTurn) if spec.name not in ("prediction", "failure"))
