"""A team's vote: which agent's answer a voting team (independent, decentralized) submits.

Each agent's answer gets a vote key (or none); the most common key wins, a tie
goes to the key whose first holder is earliest, and the team submits that
first holder's answer. Two rules assign the keys:

`reference` (the default) counts exactly as the reference harness does. An
agent votes with the text the scorer would read (`select_call`: the chosen
bracketed call, or the whole answer trimmed when it holds none):

* a call that parses votes with its name and its exact parsed arguments, as
  sorted-key JSON: `'1'` is not `1`, `' x'` is not `'x'`, but, as in the
  reference, a tuple equals a list and a dict key `1` equals `'1'`;
* anything else (a positional call, prose without a call) votes with that text
  lower-cased and trimmed;
* an empty answer (a model error leaves one) does not vote; if nobody votes the
  team has no answer.

`normalized` (an option, not the reference) differs in three ways: string
values are trimmed before calls are compared (so `' x'` and `'x'` are one
call); only parsed calls vote while any parses; and when none parses, the whole
raw answers vote, with case and runs of whitespace folded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from apibank_bench.data.tasks import render_call
from apibank_bench.scoring.parsing import ParsedCall
from apibank_bench.scoring.prediction import Prediction

RULES = ("reference", "normalized")


@dataclass(frozen=True)
class Vote:
    winner: int | None  #: the index of the answer the team submits; None if nobody voted
    keys: list[str | None]  #: each agent's vote key (None: did not vote)
    tally: list[tuple[str, int]] = field(default_factory=list)  #: votes per key, in first-seen order
    rule: str = "reference"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "keys": list(self.keys), "tally": [[key, count] for key, count in self.tally],
                "winner": self.winner}


def _prediction(answer: str | None | Prediction) -> Prediction:
    return answer if isinstance(answer, Prediction) else Prediction.submitted(answer)


def vote(answers: Sequence[str | None | Prediction], rule: str = "reference") -> Vote:
    """Count the answers' votes under `rule` and pick the winner."""
    try:
        keys = _RULES[rule]([_prediction(answer) for answer in answers])
    except KeyError:
        raise ValueError(f"unknown vote rule {rule!r}; expected one of {', '.join(RULES)}") from None
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, index)
    if not counts:
        return Vote(None, keys, [], rule)
    best = max(counts, key=lambda key: (counts[key], -first[key]))
    return Vote(first[best], keys, list(counts.items()), rule)


# -- the reference rule ---------------------------------------------------------------------

def reference_key(answer: str | None | Prediction) -> str | None:
    """One answer's vote key under the reference's rule (None: it does not vote)."""
    prediction = _prediction(answer)
    chosen, call = prediction.text or "", prediction.call
    if not chosen.strip():
        return None
    try:
        if call is not None:
            return json.dumps({"name": call.name, "params": call.arguments}, sort_keys=True, default=str)
    except TypeError:  # a dict mixing key types cannot be sorted (the reference crashes)
        pass
    return chosen.strip().lower()


def _reference_keys(predictions: Sequence[Prediction]) -> list[str | None]:
    return [reference_key(prediction) for prediction in predictions]


# -- the normalized rule (an option) --------------------------------------------------------

def canonical_call(answer: str | None | Prediction) -> str | None:
    """An answer's call in canonical text (`canonical_text`); None if it does not parse."""
    call = _prediction(answer).call
    return None if call is None else canonical_text(call)


def canonical_text(call: ParsedCall) -> str:
    """A call's canonical text (arguments sorted by key, string values trimmed).

    This is the normalized vote's key, and what agents are shown as a peer's proposed call.
    """
    return render_call(call.name, {key: _trimmed(value) for key, value in sorted(call.arguments.items())})


def _trimmed(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)):
        return [_trimmed(item) for item in value]
    if isinstance(value, dict):
        return {key: _trimmed(item) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return value


def _normalized_keys(predictions: Sequence[Prediction]) -> list[str | None]:
    keys = [canonical_call(prediction) for prediction in predictions]
    if any(keys):
        return keys
    return [" ".join((prediction.answer or "").lower().split()) or None for prediction in predictions]


_RULES: dict[str, Callable[[Sequence[Prediction]], list[str | None]]] = {
    "reference": _reference_keys, "normalized": _normalized_keys,
}
