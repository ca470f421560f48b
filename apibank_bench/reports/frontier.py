"""The accuracy–cost frontier over several runs (a sweep's cells, or results folders), with its uncertainty.

Each configuration has its accuracy (Wilson 95 % interval) and its cost per instance (a bootstrap 95 %
interval over instances): money with a price table (`--price`, `--price-file`), else tokens. A
configuration is on the frontier when no other is at least as accurate for at most its cost (better in
one of the two): point estimates pick the frontier, as leaderboards do. Then each claim is tested:

- neighbours on the frontier (in order of cost) get `compare`'s paired comparison;
- a configuration off the frontier is `dominated` when some frontier configuration that dominates it
  in point estimates does so with significance on the instances they share: it is significantly more
  accurate, paired as the regression gate decides (exact McNemar at `--gate-alpha`), or significantly
  cheaper (the paired bootstrap 95 % interval of the cost difference excludes 0); otherwise it is
  `not distinguishable from the frontier`: the data cannot tell it from a frontier configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apibank_bench.core.settings import BY_NAME
from apibank_bench.reports.pairs import Run, compare_pair, pair, significantly_worse
from apibank_bench.runs.cost import PriceTable, instance_costs
from apibank_bench.runs.pairing import first_epoch
from apibank_bench.runs.results import TRACES
from apibank_bench.runs.stats import wilson
from apibank_bench.runs.summary import read_traces

RESAMPLES = 2000
ON, DOMINATED, INDISTINCT = "on the frontier", "dominated", "not distinguishable from the frontier"


@dataclass
class Point:
    """One configuration: its accuracy and its cost per instance, each with a 95 % interval."""

    run: Run
    accuracy: float
    accuracy_95: tuple[float, float]
    cost: float | None  #: mean cost per instance (None: no instance with known cost)
    cost_95: tuple[float, float] | None
    costs: dict[str, float] = field(repr=False, default_factory=dict)  #: instance -> its cost (epoch 0)
    status: str = ""
    against: str | None = None  #: the frontier configuration it was judged against
    reason: str = ""

    @property
    def name(self) -> str:
        return self.run.name


def _bootstrap_mean(values: list[float], seed: int) -> tuple[float, float] | None:
    import numpy as np

    if not values:
        return None
    data = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, data.size, size=(RESAMPLES, data.size))
    low, high = np.percentile(data[draws].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def point_of(run: Run, table: PriceTable | None, seed: int = 0) -> Point:
    rows = first_epoch(run.rows)
    correct = sum(row.is_correct for row in rows.values())
    traces = [trace for trace in read_traces(run.path / TRACES) if not trace.get("epoch")]  # paired on epoch 0
    triples, _ = instance_costs(traces, table)
    costs = {instance: spent for instance, spent, _ in triples if instance in rows}
    values = list(costs.values())
    n = len(rows)
    return Point(run, correct / n if n else 0.0, wilson(correct, n), sum(values) / len(values) if values else None,
                 _bootstrap_mean(values, seed), costs)


def _cost(point: Point) -> float:
    """The cost of a point known to have one."""
    assert point.cost is not None, "a point without a cost is never compared on cost"
    return point.cost


def frontier_of(points: list[Point]) -> list[Point]:
    """The configurations no other one dominates in point estimates, in order of cost (then accuracy)."""
    priced = [p for p in points if p.cost is not None]

    def dominates(a: Point, b: Point) -> bool:
        return _cost(a) <= _cost(b) and a.accuracy >= b.accuracy and (_cost(a) < _cost(b) or a.accuracy > b.accuracy)

    on = [p for p in priced if not any(dominates(q, p) for q in priced if q is not p)]
    return sorted(on, key=lambda p: (_cost(p), -p.accuracy))


def paired_cost_difference(a: Point, b: Point, ids: list[str], seed: int) -> tuple[float, tuple[float, float]] | None:
    """Mean of b's cost minus a's over the instances both priced, with a bootstrap 95 % interval."""
    shared = [i for i in ids if i in a.costs and i in b.costs]
    differences = [b.costs[i] - a.costs[i] for i in shared]
    interval = _bootstrap_mean(differences, seed)
    return None if interval is None else (sum(differences) / len(differences), interval)


def judge(frontier_point: Point, point: Point, alpha: float, seed: int) -> tuple[bool, str]:
    """Whether `frontier_point` dominates `point` with significance, and why (in words)."""
    pairing = pair(frontier_point.run, point.run)
    if pairing.refused:  # as `compare` and the gate: runs on other data or scorers are not compared
        return False, f"not comparable with {frontier_point.name}: " + "; ".join(pairing.refused)
    if not pairing.paired:
        return False, "no instance to pair"
    accuracy = compare_pair(frontier_point.run, point.run, seed, pairing)["overall"]
    cost = paired_cost_difference(frontier_point, point, pairing.paired, seed)
    facts = f"accuracy {accuracy['difference']:+.1%} (McNemar p = {accuracy['mcnemar_p']:.3g})"
    if cost is not None:
        facts += f", cost {cost[0]:+.4g} [{cost[1][0]:.4g}, {cost[1][1]:.4g}] per instance"
    facts += f" on {accuracy['n']} paired instances"
    if significantly_worse(accuracy, alpha):
        return True, f"significantly less accurate than {frontier_point.name}: {facts}"
    if cost is not None and cost[1][0] > 0 and accuracy["difference"] <= 0:
        return True, f"significantly costlier than {frontier_point.name}: {facts}"
    return False, f"against {frontier_point.name}: {facts}"


def frontier(runs: list[Run], table: PriceTable | None = None, seed: int = 0,
             alpha: float = BY_NAME["gate_alpha"].default) -> dict[str, Any]:
    """Points, the frontier, the paired comparisons of its neighbours and the class of every other point."""
    points = [point_of(run, table, seed) for run in runs]
    on = frontier_of(points)
    for point in on:
        point.status = ON
    for point in points:
        if point.status:
            continue
        if point.cost is None:
            point.status, point.reason = INDISTINCT, "no cost: its usage (or a model's price) is missing"
            continue
        dominators = [q for q in on if _cost(q) <= point.cost and q.accuracy >= point.accuracy]
        judged = [(q, *judge(q, point, alpha, seed)) for q in dominators]
        hit = next(((q, why) for q, significant, why in judged if significant), None)
        if hit:
            point.status, point.against, point.reason = DOMINATED, hit[0].name, hit[1]
        else:
            point.status = INDISTINCT
            point.against = judged[0][0].name if judged else None
            point.reason = "; ".join(why for _, _, why in judged)
    neighbours = [compare_pair(a.run, b.run, seed) for a, b in zip(on, on[1:])]
    return {"unit": "price-table money" if table else "tokens", "price_table": table.to_dict() if table else None,
            "alpha": alpha, "points": points, "frontier": [p.name for p in on], "neighbours": neighbours}


def cost_text(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" + (f" [{interval[0]:.4g}, {interval[1]:.4g}]" if interval else "")


def ordered(result: dict[str, Any]) -> list[Point]:
    """The points in order of cost, then accuracy (those without a cost last): the table's and the plot's numbers."""
    return sorted(result["points"], key=lambda p: (p.cost is None, p.cost or 0, -p.accuracy))


def rows(result: dict[str, Any]) -> list[list[str]]:
    """The frontier table: number, configuration, accuracy [95 %], cost [95 %], status, against, why."""
    return [[str(number), p.name, f"{p.accuracy:.1%} [{p.accuracy_95[0]:.3f}, {p.accuracy_95[1]:.3f}]",
             cost_text(p.cost, p.cost_95), p.status, p.against or "—", p.reason or "—"]
            for number, p in enumerate(ordered(result), start=1)]


HEADER = ["#", "configuration", "accuracy [95% Wilson]", "cost per instance [95%]", "frontier", "judged against", "why"]


def neighbour_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for comp in result["neighbours"]:
        overall = comp["overall"]
        low, high = overall["ci_95"]
        lines.append(f"{comp['run']} vs {comp['baseline']}: accuracy {overall['difference']:+.1%} "
                     f"[{low:+.3f}, {high:+.3f}] paired on {overall['n']} instances, exact McNemar p = "
                     f"{overall['mcnemar_p']:.3g}")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The frontier as a Markdown section (sweep.md)."""
    unit = result["unit"]
    table = result["price_table"]
    lines = [f"Cost: {unit} per instance" + (f" (prices of {table['date'] or 'the command line'})" if table else "")
             + f"; significance at alpha {result['alpha']:g}.", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(result)]
    neighbours = neighbour_lines(result)
    if neighbours:
        lines += ["", "Neighbours on the frontier (paired, as `compare`):", "", *(f"- {line}" for line in neighbours)]
    return "\n".join(lines)


def plot(result: dict[str, Any], tags: dict[str, str] | None = None) -> bytes | None:
    """Accuracy against cost with both intervals; the frontier drawn as a step line. `tags`: runs over
    different instance sets, each marked with its set's letter beside its number (unpaired)."""
    from apibank_bench.reports.plots import _png, plt

    points = [p for p in result["points"] if p.cost is not None]
    if not points:
        return None
    number = {p.name: index for index, p in enumerate(ordered(result), start=1)}
    fig, ax = plt.subplots(figsize=(8, 4.8))
    markers = {ON: ("o", "#1b9e77"), DOMINATED: ("x", "#d95f02"), INDISTINCT: ("s", "#7570b3")}
    for status, (marker, color) in markers.items():
        chosen = [p for p in points if p.status == status]
        if not chosen:
            continue
        xerr = [[max(0.0, p.cost - p.cost_95[0]) if p.cost_95 else 0 for p in chosen],
                [max(0.0, p.cost_95[1] - p.cost) if p.cost_95 else 0 for p in chosen]]
        yerr = [[max(0.0, p.accuracy - p.accuracy_95[0]) for p in chosen],
                [max(0.0, p.accuracy_95[1] - p.accuracy) for p in chosen]]
        ax.errorbar([p.cost for p in chosen], [p.accuracy for p in chosen], xerr=xerr, yerr=yerr, fmt=marker,
                    color=color, capsize=3, label=status)
        for p in chosen:  # the table's number: names are long, and points of one accuracy would overprint them
            letter = (tags or {}).get(p.name, "").removeprefix("instances ")[:1]
            ax.annotate(f"{number[p.name]}" + (f" (set {letter})" if letter else ""), (p.cost, p.accuracy), textcoords="offset points", xytext=(5, 5),
                        fontsize="small")
    on = [p for p in points if p.status == ON]
    ax.step([p.cost for p in on], [p.accuracy for p in on], where="post", color="#1b9e77", label="frontier")
    ax.set_xlabel(f"cost per instance ({result['unit']}, 95% bootstrap interval)")
    ax.set_ylabel("accuracy (95% Wilson interval)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize="small")  # below: labels stay clear
    return _png(fig)
