"""The report's figures (matplotlib, Agg backend), each returned as PNG bytes."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display, no GUI toolkit: the report is built headless
import matplotlib.pyplot as plt  # noqa: E402

from apibank_bench.scoring.stage import Stage  # noqa: E402

FAILURE_COLORS = {Stage.PARSE: "#d95f02", Stage.API_NAME: "#7570b3", Stage.SCORE: "#e7298a", Stage.ERROR: "#666666"}


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _error(part: dict) -> tuple[float, float]:
    """Distances from the accuracy to the Wilson bounds (never negative, whatever the rounding)."""
    low, high = part["wilson_95"]
    return max(0.0, part["accuracy"] - low), max(0.0, high - part["accuracy"])


def _label(name: str) -> str:
    return name.replace("$", r"\$")  # a `$` in a folder name is not the start of mathtext


def _legend(ax) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")  # beside the plot, hiding nothing


def _height(rows: float) -> float:
    return 1.6 + 0.45 * rows


def accuracy_intervals(runs: list[str], summaries: list[dict]) -> bytes:
    """Accuracy with its Wilson 95 % interval, overall and per level, one row per run."""
    levels = sorted({level for summary in summaries for level in summary["by_level"]})
    series = [("overall", None), *((f"level {level}", level) for level in levels)]
    fig, ax = plt.subplots(figsize=(8, _height(len(runs) * len(series) / 2)))
    step = 0.8 / len(series)
    for index, (label, level) in enumerate(series):
        ys, xs, lows, highs = [], [], [], []
        for row, summary in enumerate(summaries):
            part = summary if level is None else summary["by_level"].get(level)
            if not part:
                continue
            ys.append(row - 0.4 + step * (index + 0.5))
            xs.append(part["accuracy"])
            below, above = _error(part)
            lows.append(below)
            highs.append(above)
        ax.errorbar(xs, ys, xerr=[lows, highs], fmt="o" if level is None else "s", capsize=3, label=label,
                    markersize=7 if level is None else 5)
    ax.set_yticks(range(len(runs)), [_label(name) for name in runs])
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("accuracy (95% Wilson interval)")
    ax.grid(axis="x", alpha=0.3)
    _legend(ax)
    return _png(fig)


def failures_by_stage(runs: list[str], summaries: list[dict]) -> bytes:
    """Wrong answers and errors per run, stacked by the stage that failed."""
    fig, ax = plt.subplots(figsize=(8, _height(len(runs))))
    left = [0] * len(runs)
    for stage, color in FAILURE_COLORS.items():
        counts = [summary["failures_by_stage"].get(stage, 0) for summary in summaries]
        ax.barh(range(len(runs)), counts, left=left, color=color, label=stage)
        left = [a + b for a, b in zip(left, counts)]
    ax.set_yticks(range(len(runs)), [_label(name) for name in runs])
    ax.invert_yaxis()
    ax.set_xlabel("instances not correct, by failing stage")
    _legend(ax)
    return _png(fig)


def accuracy_vs_tokens(runs: list[str], summaries: list[dict]) -> bytes | None:
    """Accuracy against mean tokens per instance; None when no run recorded its usage."""
    points = [(name, summary) for name, summary in zip(runs, summaries)
              if summary["tokens_per_instance"]["total_per_instance"] is not None]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, summary in points:
        x = summary["tokens_per_instance"]["total_per_instance"]
        below, above = _error(summary)
        ax.errorbar([x], [summary["accuracy"]], yerr=[[below], [above]], fmt="o", capsize=3)
        ax.annotate(_label(name), (x, summary["accuracy"]), textcoords="offset points", xytext=(5, 5),
                    fontsize="small")
    # Every agent's tokens count (a team of 8 pays for 8 answers and more), so topologies share one axis;
    # when they span more than a factor of 20, a log axis keeps the single agent readable beside them.
    ax.set_xlabel("tokens per instance (prompt + completion of all agents, mean over instances with usage)")
    ax.set_ylabel("accuracy (95% Wilson interval)")
    ax.set_ylim(-0.02, 1.02)
    spent = [summary["tokens_per_instance"]["total_per_instance"] for _, summary in points]
    if min(spent) > 0 and max(spent) / min(spent) > 20:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    return _png(fig)
