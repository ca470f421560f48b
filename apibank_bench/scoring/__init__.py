"""Scoring an answer: the parser, the three stages and the failure reasons (`stage`), the parsed answer
(`prediction`), the scorer (`scorer`), the scorers of
the `score` stage per API (`api_scorers`, `toolsearcher_scorers`) and building the curated lists.

Importing the package is light: `Stage` and `Reason` are all that readers of results files need, so the scorer
(which imports the API environment) loads only when `Score` or `Scorer` is first asked for.
"""

from apibank_bench.scoring.stage import Reason, Stage

__all__ = ["Reason", "Score", "Scorer", "Stage"]


def __getattr__(name: str):
    if name in ("Score", "Scorer"):
        from apibank_bench.scoring import scorer

        return getattr(scorer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
