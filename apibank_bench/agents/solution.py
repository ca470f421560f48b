"""What every solver returns for one task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apibank_bench.agents.turn import AgentTurn
    from apibank_bench.scoring.prediction import Prediction


@dataclass
class Solution:
    answer: str | None  #: the final answer the scorer reads
    trace: dict[str, Any] = field(default_factory=dict)  #: the trace besides the agents' turns: votes, tracebacks...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    error: str | None = None  #: a model error that stopped this instance (recorded, not raised)
    turns: list[AgentTurn] | None = None  #: the agents' turns, typed until the trace is written (None: no agents)
    prediction: Prediction | None = None  #: `answer` parsed already (None: the scorer parses it)
    answered_by: str | None = None  #: the path the scored answer came through (agents.tool_answer; None: no agent)

    def to_trace(self) -> dict[str, Any]:
        """The trace as its file holds it: `trace`, then the turns as `agents`."""
        if self.turns is None:
            return self.trace
        return {**self.trace, "agents": [turn.to_dict() for turn in self.turns]}
