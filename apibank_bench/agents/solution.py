"""What every solver returns for one task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Solution:
    answer: str | None  #: the raw final answer the scorer reads
    trace: dict[str, Any] = field(default_factory=dict)  #: messages, completions, agents, votes...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    error: str | None = None  #: a model error that stopped this instance (recorded, not raised)
