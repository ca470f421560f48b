"""How far an answer got: the scorer's three stages, and `error` for an instance with no answer.

A `StrEnum`, so a stage is written to JSON, compared and formatted as its plain name
(`"parse"`), exactly as the results files have always spelled it.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    PARSE = "parse"  #: the answer held no bracketed keyword call that parses
    API_NAME = "api_name"  #: the call parsed but named another API than the gold call
    SCORE = "score"  #: the call was executed and checked against the gold result (correct or not)
    ERROR = "error"  #: no answer to score: the endpoint, the solver or the scorer failed, or time ran out
