"""The rules of a paired comparison between two runs, which `compare`, the report, the chat/sdk table
(reports.modes), the frontier and the pytest regression gate (reports.gate) all pair by.

A run is a results folder read back (`Run`, `load_run`). `pair` holds the rules: runs whose recorded
data, manifest or ToolSearcher scorer differ are not comparable (`refused` says how they differ, in
words); runs that differ in the selection are paired on the instances they share, with a note; rows
that are infrastructure errors in either run are left out of the pairing (and counted). Runs of
several epochs are paired on epoch 0. `compare_pair` gives the paired statistics on what `pair`
pairs: each accuracy, the difference with a seeded paired-bootstrap 95 % interval, the exact
McNemar test, the instances won and lost, overall and per level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apibank_bench.core import settings
from apibank_bench.runs.pairing import first_epoch, pair_rows, paired_stats
from apibank_bench.runs.results import RESULTS, read_rows, read_summary, unreadable_count
from apibank_bench.runs.row import ResultRow

#: What must agree between compared runs, by name, as paths into summary.json's `config`
#: (the first path both runs recorded decides; a path only one run recorded is not a difference).
MUST_AGREE = {
    "data lock": ("data_hash", "provenance.data_hash", "run.data_hash"),
    "manifest": ("run.level", "manifest"),
    "ToolSearcher scorer": ("run.toolsearcher_scorer", "toolsearcher_scorer"),
}
#: Settings that choose the instances: runs that differ in them are paired on the instances they share.
SELECTION = tuple(setting.name for setting in settings.RUN_SETTINGS
                  if setting.role == settings.SELECTION and setting.name != "level")
MANIFESTS = {"all": "the 100-task eval manifest", "1": "the Level-1 curated list", "2": "the Level-2 curated list",
             "3": "the Level-3 curated list"}
_MISSING = object()


class RunMismatch(ValueError):
    """The runs' recorded configurations make a paired comparison meaningless."""


@dataclass
class Run:
    name: str
    path: Path
    rows: list[ResultRow]
    summary: dict
    unreadable: int = 0  #: lines of its results.jsonl that could not be read (in it, or set aside)
    folder: str = ""  #: the folder as the report found it (relative to what it was given)

    @property
    def config(self) -> dict:
        return self.summary.get("config") or {}


def load_run(path: Path, name: str | None = None) -> Run:
    path = Path(path)
    if not (path / RESULTS).is_file():
        raise FileNotFoundError(f"{path} is not a results folder (no {RESULTS})")
    summary = read_summary(path) or {}
    return Run(name or path.name, path, read_rows(path), summary, unreadable_count(path))


def _lookup(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _words(aspect: str, value) -> str:
    """A recorded value as a reader wants it: a hash cut short, a manifest by its name, a default said."""
    if aspect == "data lock":
        return f"{str(value)[:12]}..." if isinstance(value, str) and len(value) > 16 else _text(value)
    if aspect == "manifest":
        return f"level {value} ({MANIFESTS[str(value)]})" if str(value) in MANIFESTS else _text(value)
    if aspect == "ToolSearcher scorer" and value is None:
        return "default (keyword for Level 1, else official)"
    return _text(value)


def _text(value) -> str:
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, (list, tuple)):
        return "/".join(map(str, value)) if len(value) == 2 and all(isinstance(v, int) for v in value) \
            else ",".join(map(str, value))
    if isinstance(value, dict):
        return " ".join(f"{key} {_text(item)}" if not isinstance(item, bool) else key for key, item in value.items())
    return str(value)


def _selection(config: dict) -> dict[str, object]:
    """The selection a run recorded: its selection settings and what pytest deselected (`-k`...), where
    that left the folder without some of the selection's rows. A folder a session narrowed (`--lf`
    reruns what failed; `-k` the instances named) that holds a row for every selected case holds the
    selection: how its rows came is not a difference."""
    found = {name: _lookup(config, f"run.{name}") for name in SELECTION}
    recorded = config.get("_selection") or {}
    narrowed = dict(recorded.get("pytest") or {})
    if "deselected_without_row" in recorded:
        narrowed = narrowed if recorded["deselected_without_row"] else {}
    else:  # summaries written before it was counted: `--lf` deselects only cases that have a correct row
        narrowed.pop("--lf", None)
    return {**{name: value for name, value in found.items() if value is not _MISSING}, "pytest": narrowed}


def refusals(base_config: dict, run_config: dict, aspects=tuple(MUST_AGREE)) -> list[str]:
    """How two recorded configs differ in what must agree (`aspects` of MUST_AGREE), in words."""
    refused = []
    for aspect in aspects:
        both = [path for path in MUST_AGREE[aspect]
                if _lookup(base_config, path) is not _MISSING and _lookup(run_config, path) is not _MISSING][:1]
        for path in both:
            ours, theirs = _lookup(base_config, path), _lookup(run_config, path)
            if ours != theirs:
                refused.append(f"{aspect} {_words(aspect, theirs)} vs {_words(aspect, ours)}")
    return refused


def mismatches(runs: list[Run], aspects=tuple(MUST_AGREE)) -> list[str]:
    """One message per run that differs from the baseline (the first) in `aspects`."""
    return [f"{run.name} vs {runs[0].name}: {'; '.join(found)}" for run in runs[1:]
            if (found := refusals(runs[0].config, run.config, aspects))]


@dataclass
class Pairing:
    """What two runs can be compared on: the rules of `pair`."""

    refused: list[str]  #: why the runs are not comparable, in words ("ToolSearcher scorer keyword vs official")
    notes: list[str]  #: what differs and is paired anyway ("limit 6 vs 10")
    shared: list[str]  #: instances both runs hold, in the baseline's order
    paired: list[str]  #: those with an answer in both (error rows left out)
    errors_excluded: dict[str, int]  #: shared instances left out for an error row, per run


def pair(baseline: Run, run: Run) -> Pairing:
    """The one rule of a paired comparison (`compare`, and the pytest regression gate).

    Data, manifest and ToolSearcher scorer must agree where both runs recorded them (else
    `refused` says, in words, how they differ: "ToolSearcher scorer keyword vs official",
    run's value first). The selection (`--limit`, `--offset`, `--only`, `--shard`, and
    pytest's `-k`, `--deselect`, `--lf`) may differ: the runs are then paired on the
    instances both hold, with a note ("limit 6 vs 10"). Rows that are errors in either run
    are left out of the pairing and counted.
    """
    base_config, run_config = _with_selection(baseline), _with_selection(run)
    refused = refusals(base_config, run_config)
    ours, theirs = _selection(base_config), _selection(run_config)
    notes = [f"{name} {_text(theirs[name])} vs {_text(ours[name])}" for name in [*SELECTION, "pytest"]
             if name in ours and name in theirs and ours[name] != theirs[name]]
    matched = pair_rows(baseline.rows, run.rows)
    if (len(matched.shared) < max(len(matched.base), len(matched.other)) and not notes
            and not (baseline.unreadable or run.unreadable)):
        notes.append(f"{len(matched.other)} vs {len(matched.base)} instances")
    return Pairing(refused, notes, matched.shared, matched.paired, matched.errors_excluded)


def _with_selection(run: Run) -> dict:
    """The run's config with its summary's record of the selection (pytest's part) beside it."""
    return {**run.config, "_selection": run.summary.get("selection") or {}}


def significantly_worse(stats: dict, alpha: float) -> bool:
    """Whether paired statistics (`paired_stats`) show the run worse than the baseline at level `alpha`
    (exact two-sided McNemar test on the discordant instances)."""
    return stats["difference"] < 0 and stats["mcnemar_p"] < alpha


def compare_pair(baseline: Run, run: Run, seed: int = 0, pairing: Pairing | None = None) -> dict:
    """The paired statistics of `run` against `baseline`, on the instances `pair` pairs (epoch 0)."""
    pairing = pairing or pair(baseline, run)
    base, other = first_epoch(baseline.rows), first_epoch(run.rows)  # as runs.pairing.pair_rows matched them
    levels: dict[str, list[str]] = {}
    for i in pairing.paired:
        levels.setdefault(str(base[i].level), []).append(i)
    return {
        "run": run.name, "baseline": baseline.name, "shared": len(pairing.shared), "paired": len(pairing.paired),
        "epochs": {"baseline": epochs_held(baseline.rows), "run": epochs_held(run.rows)},
        "only_in_baseline": len(base) - len(pairing.shared), "only_in_run": len(other) - len(pairing.shared),
        "errors_excluded": pairing.errors_excluded, "notes": pairing.notes, "refused": pairing.refused,
        "overall": paired_stats(pairing.paired, base, other, seed),
        "by_level": {level: paired_stats(levels[level], base, other, seed) for level in sorted(levels)},
    }


def epochs_held(rows: list[ResultRow]) -> int:
    """The epochs a run's rows hold (1 for a run without epochs)."""
    return max((row.key[1] for row in rows), default=0) + 1


def format_p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
