"""`apibank-bench compare RUN_A RUN_B [...]`: paired statistics between runs on the instances they share.

The first run is the baseline; every other run is compared to it, overall and per level: each
accuracy, the difference with a seeded paired-bootstrap 95 % interval, the exact McNemar test,
and the instances won and lost, and the minimum detectable difference: the smallest difference
this paired design (its n, with the discordance it showed) detects with 80 % power. Rows that
are infrastructure errors in either run are left out of the pairing (and counted). The rules are
reports.pairs' `pair` (the pytest regression gate, reports.gate, uses them too): runs whose recorded
data, manifest or ToolSearcher scorer differ are not comparable (`compare` refuses them, saying how
they differ in words, unless forced); runs that differ in the selection are paired on the instances
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
from pathlib import Path

from apibank_bench.reports.modes import mode_comparisons, mode_lines
from apibank_bench.reports.pairs import Run, RunMismatch, compare_pair, format_p, load_run, pair, significantly_worse
from apibank_bench.runs.epochs import epoch_summary
from apibank_bench.runs.results import RESULTS, UNREADABLE
from apibank_bench.runs.summary import interval_text, tokens_per_correct


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
