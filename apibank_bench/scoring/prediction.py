"""An answer parsed once: the `Prediction` that the scorer, a team's vote and the agents' scores read.

Parsing an answer (scoring.parsing) is the costly step on the instance path; a team's answers
were parsed again by the vote, the team's scorer and each agent's score. A `Prediction` carries
the text and its parse (or the parse's error), so each answer is parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass

from apibank_bench.scoring.parsing import ParsedCall, ParseError, parse_call, select_call


@dataclass(frozen=True, eq=False)
class Prediction:
    text: str | None  #: the answer as submitted (what predictions.jsonl holds)
    call: ParsedCall | None  #: its call; None when it did not parse
    error: ParseError | None = None  #: why it did not parse

    @classmethod
    def of(cls, text: str | None) -> Prediction:
        """`text` parsed (the scorer's reading of an answer)."""
        try:
            return cls(text, parse_call(text))
        except ParseError as exc:
            return cls(text, None, exc)

    @classmethod
    def submitted(cls, answer: str | None) -> Prediction:
        """What an agent's raw answer submits: its chosen bracketed call (else the answer trimmed), parsed."""
        return cls.of(select_call(answer) if answer else answer)
