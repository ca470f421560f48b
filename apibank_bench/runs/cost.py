"""What a run cost: tokens per model, and with a price table money, per correct answer with an interval.

No price is built in: prices change, so a table is given (`--price MODEL=INPUT/OUTPUT`, per million
tokens, or `--price-file`, which names its date) and summary.json records it beside the cost. Without
one, tokens are the cost. An instance's cost is the sum over its agent turns of each turn's tokens at
the price of the model that answered it (traces record the model of every turn).

Cost per correct answer is a ratio of sums over instances; its bootstrap resamples instances (an
instance's epochs stay together). A resample with no correct answer has no finite ratio: it counts as
+infinity, so where more than 2.5 % of resamples have none the upper bound is unbounded (None, with
`upper_unbounded`), never a number made up from the other resamples: the bootstrap is tokens per correct
answer's own (`stats.ratio_bootstrap`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.stats import ratio_bootstrap

PER = 1_000_000  #: prices are per million tokens


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, tuple[float, float]]  #: model -> (input, output) per million tokens
    date: str | None  #: the date the prices were read (the file's); None: given on the command line
    source: str  #: the file, or "--price"

    def to_dict(self) -> dict:
        return {"per_million_tokens": {model: {"input": i, "output": o} for model, (i, o) in sorted(self.prices.items())},
                "date": self.date, "source": self.source}

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.prices.get(model)
        return None if price is None else (prompt_tokens * price[0] + completion_tokens * price[1]) / PER


def price_table(prices: Sequence[str] = (), price_file: str | None = None) -> PriceTable | None:
    """The run's price table (None: no prices given). `--price` entries win over the file's.
    ValueError for a file that is not a dated table."""
    table: dict[str, tuple[float, float]] = {}
    date, source = None, "--price"
    if price_file:
        path = Path(price_file).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"price file {path}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("prices"), dict) or not data.get("date"):
            raise ValueError(f"price file {path}: expected {{\"date\": \"YYYY-MM-DD\", \"prices\": "
                             "{\"MODEL\": [INPUT, OUTPUT]}} (per million tokens; prices change, so it names its date)")
        for model, pair in data["prices"].items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, (int, float)) and p >= 0
                                                                      for p in pair)):
                raise ValueError(f"price file {path}: {model}: expected [INPUT, OUTPUT] per million tokens, got {pair!r}")
            table[str(model)] = (float(pair[0]), float(pair[1]))
        date, source = str(data["date"]), str(path)
    for item in prices:
        model, _, pair = item.rpartition("=")
        low, high = pair.split("/")
        table[model] = (float(low), float(high))
    if prices and price_file:
        source += " and --price"
    return PriceTable(table, date, source) if table else None


def turn_usage(turn: dict) -> tuple[int, int] | None:
    prompt, completion = turn.get("prompt_tokens"), turn.get("completion_tokens")
    if not prompt or completion is None:
        return None
    return int(prompt), int(completion)


def tokens_by(traces: Iterable[dict], key: Callable[[dict], str]) -> dict[str, dict]:
    """Per `key(turn)` over each trace's agent turns (a role, a model): turns, tokens, and turns without usage."""
    groups: dict[str, Counter] = defaultdict(Counter)
    for trace in traces:
        for turn in trace.get("agents") or []:
            counts = groups[key(turn)]
            counts["turns"] += 1
            usage = turn_usage(turn)
            if usage is None:
                counts["turns_missing_usage"] += 1
            else:
                counts["prompt_tokens"] += usage[0]
                counts["completion_tokens"] += usage[1]
    keys = ("turns", "turns_missing_usage", "prompt_tokens", "completion_tokens")
    return {name: {k: groups[name][k] for k in keys} for name in sorted(groups)}


def tokens_by_model(traces: Iterable[dict]) -> dict[str, dict]:
    """Per model that answered (each trace's agent turns): turns, tokens, and turns without usage."""
    return tokens_by(traces, lambda turn: str(turn.get("model") or "?"))


def per_correct(triples: Iterable[tuple[str, float, bool]], seed: int = 0) -> dict:
    """Cost per correct answer from (instance, cost, correct) triples, instances resampled whole."""
    clusters: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for instance, spent, right in triples:
        clusters[instance][0] += spent
        clusters[instance][1] += bool(right)
    cost = sum(spent for spent, _ in clusters.values())
    correct = int(sum(right for _, right in clusters.values()))
    interval = ratio_bootstrap([c for c, _ in clusters.values()], [r for _, r in clusters.values()], seed)
    return {"per_correct": cost / correct if correct else None, "ci_95": None if interval is None else list(interval),
            "upper_unbounded": interval is not None and interval[1] is None,
            "total": cost, "correct": correct, "instances": len(clusters)}


def instance_costs(traces: Iterable[dict], table: PriceTable | None) -> tuple[list[tuple[str, float, bool]], dict]:
    """(instance, cost, correct) per trace with a result: money with a table, else tokens; and what was left
    out (traces whose usage or a model's price is missing)."""
    triples: list[tuple[str, float, bool]] = []
    missing_usage, unpriced = 0, Counter[str]()
    for trace in traces:
        result, turns = trace.get("result") or {}, trace.get("agents") or []
        if not result:
            continue
        row = ResultRow.from_json(result)
        spent, ok = 0.0, True
        for turn in turns:
            usage = turn_usage(turn)
            if usage is None:
                missing_usage += 1
                ok = False
                break
            if table is None:
                spent += sum(usage)
                continue
            price = table.cost(str(turn.get("model") or "?"), *usage)
            if price is None:
                unpriced[str(turn.get("model") or "?")] += 1
                ok = False
                break
            spent += price
        if ok:
            triples.append((str(trace.get("id")) + "", spent, row.is_correct))
    return triples, {"instances_missing_usage": missing_usage, "models_without_price": sorted(unpriced)}


def cost_summary(traces: Sequence[dict], table: PriceTable | None) -> dict:
    """summary.json's `cost`: in money with a price table, else in tokens, with the cost per correct answer."""
    triples, left_out = instance_costs(traces, table)
    result: dict[str, Any] = {"unit": "price-table money" if table else "tokens",
                              "price_table": table.to_dict() if table else None,
                              **per_correct(triples), **left_out}
    result["per_instance"] = result["total"] / result["instances"] if result["instances"] else None
    return result
