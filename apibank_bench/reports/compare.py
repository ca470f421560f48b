"""`apibank-bench compare RUN_A RUN_B [...]`: paired statistics between runs on the instances they share.

The first run is the baseline; every other run is compared to it, overall and per level: each
accuracy, the difference with a seeded paired-bootstrap 95 % interval, the exact McNemar test,
and the instances won and lost, and the minimum detectable difference: the smallest difference
this paired design (its n, with the discordance it showed) detects with 80 % power. Rows that
are infrastructure errors in either run are left out of the pairing (and counted). `pair` holds
the rules (the pytest regression gate, reports.gate, uses them too): runs whose recorded data,
manifest or ToolSearcher scorer differ are not comparable (`compare` refuses them, saying how they
differ in words, unless forced); runs that differ in the selection are paired on the instances
they share, with a note.

Runs of several epochs are paired on epoch 0 (the epoch whose seeds a run without epochs uses),
one pair per instance, so the exact McNemar test stays valid; each run's mean accuracy over its
epochs and its flip rate (the share of instances that are right in some epochs only) are given
beside. Each run's tokens per correct answer (runs.summary.tokens_per_correct) too. Among the runs,
each `chat` run and an `sdk` run of the same setup are also paired with each other (reports.modes:
`modes`), with the path each run's answers came through.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from apibank_bench.core import settings
from apibank_bench.runs.results import RESULTS, UNREADABLE, read_rows, read_summary, unreadable_count
from apibank_bench.runs.epochs import epoch_summary
from apibank_bench.runs.pairing import first_epoch, pair_rows, paired_stats
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.summary import interval_text, tokens_per_correct

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


def run_facts(run: Run) -> dict:
    """What a comparison says about each run on its own: epochs, flip rate, mean accuracy over the
    epochs, tokens per correct answer."""
    facts: dict = {"name": run.name, "path": str(run.path), "instances": len({row.id for row in run.rows}),
                   "tokens_per_correct": tokens_per_correct(run.rows),
                   "tokens_per_correct_by_role": run.summary.get("tokens_per_correct_by_role") or {}}
    if any(row.epoch for row in run.rows):
        repeats = epoch_summary(run.rows)
        facts.update(epochs=repeats["epochs"], flip_rate=repeats["flip_rate"],
                     mean_accuracy_over_epochs=repeats["mean_accuracy"], clustered_95=repeats["clustered_95"])
    return facts


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


def pairing_words(comp: dict) -> str:
    """What the paired accuracies are of: with epochs, epoch 0's rows, not a run's mean over its epochs."""
    epochs = comp.get("epochs") or {}
    if max(epochs.values(), default=1) <= 1:
        return ""
    held = ", ".join(f"{comp[side]} {count} epoch{'s' if count > 1 else ''}" for side, count in
                     (("baseline", epochs["baseline"]), ("run", epochs["run"])))
    return (f"paired on epoch 0 only ({held}): the accuracies below are epoch 0's, not the mean over the epochs "
            "in each run's summary")


def compare_runs(runs: list[Run], seed: int = 0, force: bool = False) -> dict:
    if len(runs) < 2:
        raise ValueError("compare needs at least two results folders")
    pairings = [(run, pair(runs[0], run)) for run in runs[1:]]
    problems = [f"{run.name} vs {runs[0].name}: {'; '.join(pairing.refused)}" for run, pairing in pairings
                if pairing.refused]
    if problems and not force:
        raise RunMismatch("not comparable: " + "; ".join(problems) + " (--force compares anyway)")
    comparisons = [compare_pair(runs[0], run, seed, pairing) for run, pairing in pairings]
    problems += [f"{comp['run']} and {comp['baseline']} have no instance to pair" for comp in comparisons
                 if not comp["paired"]]
    problems += [f"{run.name}: {run.unreadable} lines of {run.path / RESULTS} could not be read (their bytes are in "
                 f"{RESULTS}{UNREADABLE} once a run sets them aside): their instances are missing, not another "
                 "selection" for run in runs if run.unreadable]
    from apibank_bench.reports.modes import mode_comparisons

    return {"baseline": runs[0].name, "seed": seed, "warnings": problems,
            "runs": [run_facts(run) for run in runs],
            "comparisons": comparisons,
            "modes": mode_comparisons(runs, seed)}


def regressions(result: dict, alpha: float) -> list[str]:
    """One line per run significantly worse than the baseline overall (see `significantly_worse`)."""
    return [f"{comp['run']} is significantly worse than {comp['baseline']}: {comp['overall']['difference']:+.1%} "
            f"on {comp['overall']['n']} paired instances, McNemar p = {format_p(comp['overall']['mcnemar_p'])} "
            f"< {alpha:g}" for comp in result["comparisons"] if significantly_worse(comp["overall"], alpha)]


def compare(run_dirs: list, seed: int = 0, force: bool = False) -> dict:
    """Compare each results folder after the first with the first (see the module docstring)."""
    return compare_runs(_named_runs(run_dirs), seed, force)


def _named_runs(run_dirs: list) -> list[Run]:
    paths = [Path(d) for d in run_dirs]
    names = [p.name for p in paths]
    if len(set(names)) < len(names):  # same folder names in different places: use the paths
        names = [str(p) for p in paths]
    return [load_run(p, name) for p, name in zip(paths, names)]


def format_p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def format_table(result: dict) -> str:
    lines = [f"# WARNING: {warning}" for warning in result["warnings"]]
    for comp in result["comparisons"]:
        lines.append(f"{comp['run']} vs baseline {comp['baseline']}: {comp['paired']} paired instances "
                     f"({comp['shared']} shared; errors left out: {comp['errors_excluded']['baseline']} in baseline, "
                     f"{comp['errors_excluded']['run']} in run)")
        if pairing_words(comp):
            lines.append(f"  {pairing_words(comp)}")
        if comp.get("notes"):
            lines.append(f"  note: the selection differs ({'; '.join(comp['notes'])}); paired on the "
                         f"{comp['shared']} instances both hold")
        lines += paired_lines(comp)
        lines.append("")
    if result.get("modes"):
        from apibank_bench.reports.modes import mode_lines

        lines += [*mode_lines(result["modes"]), ""]
    lines += [run_line(facts) for facts in result["runs"]]
    return "\n".join(lines).rstrip() + "\n"


#: What the MDD column says, printed under each table that has it.
MDD_NOTE = ("MDD 80%: the smallest difference the exact McNemar test detects with 80 % power on these paired "
            "instances at their observed discordance; none: no difference is detectable at 80 % power "
            "(too few discordant pairs)")


def format_mdd(row: dict) -> str:
    """A paired row's minimum detectable difference; `none` when no difference is detectable at 80 % power."""
    value = row["min_detectable_difference"]
    return "none" if value is None else f"{value:.1%}"


def paired_lines(comp: dict) -> list[str]:
    """The per-level table of one comparison, and the instances won and lost."""
    lines = [f"{'level':<8}{'n':>5}{'baseline':>10}{'run':>8}{'diff':>8}  {'95% CI (bootstrap)':<19}"
             f"{'McNemar p':>10}{'won':>5}{'lost':>5}{'MDD 80%':>9}"]
    for level, row in [*comp["by_level"].items(), ("overall", comp["overall"])]:
        low, high = row["ci_95"]
        lines.append(f"{level:<8}{row['n']:>5}{row['accuracy_baseline']:>10.1%}{row['accuracy_run']:>8.1%}"
                     f"{row['difference']:>+8.1%}  [{low:+.3f}, {high:+.3f}]   {format_p(row['mcnemar_p']):>10}"
                     f"{len(row['won']):>5}{len(row['lost']):>5}{format_mdd(row):>9}")
    lines.append(f"  {MDD_NOTE}")
    for word in ("won", "lost"):
        if comp["overall"][word]:
            lines.append(textwrap.fill(" ".join(comp["overall"][word]), 110, initial_indent=f"  {word}: ",
                                       subsequent_indent="    ", break_on_hyphens=False))
    return lines


def run_line(facts: dict) -> str:
    """One run on its own: tokens per correct answer, and with epochs its flip rate."""
    per_correct = facts["tokens_per_correct"]
    parts = [f"{facts['name']}: {facts['instances']} instances"]
    if per_correct["tokens_per_correct"] is not None and per_correct["tokens"]:
        parts.append(f"tokens per correct answer {per_correct['tokens_per_correct']:.0f} "
                     f"{interval_text(per_correct['ci_95'])}")
    roles = [f"{role} {part['tokens_per_correct']:.0f} {interval_text(part['ci_95'])}"
             for role, part in (facts.get("tokens_per_correct_by_role") or {}).items()
             if part.get("tokens_per_correct") is not None and part.get("ci_95")]
    if len(roles) > 1:
        parts.append("per role " + ", ".join(roles))
    if "epochs" in facts:
        low, high = facts["clustered_95"]
        parts.append(f"{facts['epochs']} epochs: mean accuracy {facts['mean_accuracy_over_epochs']:.1%} "
                     f"[{low:.3f}, {high:.3f}], flip rate {facts['flip_rate']:.1%} (paired on epoch 0)")
    return "; ".join(parts)
