"""An answer parsed once: the `Prediction` that the scorer, a team's vote and the agents' scores read.

Parsing an answer (scoring.parsing) is the costly step on the instance path; a team's answers
were parsed again by the vote, the team's scorer and each agent's score. A `Prediction` carries
the answer, the text it submits and that text's parse (or the parse's error), so each answer is
parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass

from apibank_bench.scoring.parsing import ParsedCall, ParseError, parse_call, select_call


@dataclass(frozen=True, eq=False)
class Prediction:
    answer: str | None  #: the answer as the model gave it
    text: str | None  #: what it submits, as scored and written to predictions.jsonl
    call: ParsedCall | None  #: the call `text` holds; None when it does not parse
    error: ParseError | None = None  #: why it does not parse

    @classmethod
    def of(cls, text: str | None) -> Prediction:
        """`text` parsed as it stands (the scorer's reading of an answer)."""
        try:
            return cls(text, text, parse_call(text))
        except ParseError as exc:
            return cls(text, text, None, exc)

    @classmethod
    def submitted(cls, answer: str | None) -> Prediction:
        """What an agent's answer submits: its chosen bracketed call (else the answer trimmed), parsed."""
        parsed = cls.of(select_call(answer) if answer else answer)
        return cls(answer, parsed.text, parsed.call, parsed.error)
