"""`apibank-bench compare RUN_A RUN_B [...]`: paired statistics between runs on the instances they share.

The first run is the baseline; every other run is compared to it, overall and per level: each
accuracy, the difference with a seeded paired-bootstrap 95 % interval, the exact McNemar test,
and the instances won and lost, and the minimum detectable difference: the smallest difference
this paired design (its n, with the discordance it showed) detects with 80 % power. Rows that
are infrastructure errors in either run are left out of the pairing (and counted). Runs whose
recorded data, manifest, scorer or selection differ are not comparable: `compare` refuses them
unless forced.

Runs of several epochs are paired on epoch 0 (the epoch whose seeds a run without epochs uses),
one pair per instance, so the exact McNemar test stays valid; each run's mean accuracy over its
epochs and its flip rate (the share of instances that are right in some epochs only) are given
beside. Each run's tokens per correct answer (runs.summary.tokens_per_correct) too.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from apibank_bench.runs.results import RESULTS, read_jsonl, read_summary
from apibank_bench.runs.epochs import epoch_summary, row_key
from apibank_bench.runs.stats import discordant, mcnemar_exact, min_detectable_difference, paired_bootstrap
from apibank_bench.runs.summary import is_correct, is_error, tokens_per_correct

#: What must agree between compared runs, as paths into summary.json's `config` (first present wins).
GUARDED = {
    "data hash": ("data_hash", "provenance.data_hash", "run.data_hash"),
    "manifest": ("manifest_hash", "run.manifest", "run.level"),
    "scorer": ("run.toolsearcher_scorer", "toolsearcher_scorer"),
    "selection": ("provenance.manifest_hash", "run.limit", "run.offset", "run.only", "run.shard"),
}
_MISSING = object()
#: Each guarded aspect's difference, in words (the recorded values follow in brackets).
DIFFERENCE = {
    "data hash": "was scored on other API-Bank data",
    "manifest": "drew its instances from another manifest",
    "scorer": "scored ToolSearcher calls with another scorer",
    "selection": "ran another selection of instances (level, limit, offset, only or shard)",
}


def _words(path: str) -> str:
    """`provenance.manifest_hash` -> 'manifest hash'."""
    return path.rsplit(".", 1)[-1].replace("_", " ")


def _short(value) -> str:
    """A recorded value for a sentence: hashes cut to 12 characters, lists joined."""
    if isinstance(value, str) and len(value) >= 32 and all(c in "0123456789abcdef" for c in value.lower()):
        return value[:12] + "…"
    if value is None:
        return "none"
    return ", ".join(map(str, value)) or "none" if isinstance(value, list) else str(value)


class RunMismatch(ValueError):
    """The runs' recorded configurations make a paired comparison meaningless."""


@dataclass
class Run:
    name: str
    path: Path
    rows: list[dict]
    summary: dict

    @property
    def config(self) -> dict:
        return self.summary.get("config") or {}


def load_run(path: Path, name: str | None = None) -> Run:
    path = Path(path)
    if not (path / RESULTS).is_file():
        raise FileNotFoundError(f"{path} is not a results folder (no {RESULTS})")
    summary = read_summary(path) or {}
    return Run(name or path.name, path, read_jsonl(path / RESULTS), summary)


def _lookup(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def guarded_values(config: dict) -> dict[str, dict[str, object]]:
    """Per guarded aspect, the values recorded at its paths (absent paths left out)."""
    values = {}
    for aspect, paths in GUARDED.items():
        found = {path: _lookup(config, path) for path in paths}
        values[aspect] = {path: value for path, value in found.items() if value is not _MISSING}
    return values


def mismatches(runs: list[Run], aspects=tuple(GUARDED)) -> list[str]:
    """One message per aspect (of `aspects`) on which a run differs from the baseline at a path both recorded."""
    base = guarded_values(runs[0].config)
    messages = []
    for run in runs[1:]:
        values = guarded_values(run.config)
        for aspect in aspects:
            # The first path both runs recorded decides (a hash, where there is one, before the raw options).
            common = [path for path in GUARDED[aspect] if path in values[aspect] and path in base[aspect]][:1]
            theirs = {path: values[aspect][path] for path in common}
            ours = {path: base[aspect][path] for path in common}
            if theirs != ours:
                what = ", ".join(f"{_words(path)} {_short(theirs[path])} against {_short(ours[path])}"
                                 for path in common)
                messages.append(f"{run.name} {DIFFERENCE[aspect]} than {runs[0].name} ({what})")
    return messages


def paired_stats(ids: list[str], base: dict[str, dict], other: dict[str, dict], seed: int) -> dict:
    a = [is_correct(base[i]) for i in ids]
    o = [is_correct(other[i]) for i in ids]
    b, c = discordant(a, o)
    n = len(ids)
    acc_a = sum(a) / n if n else 0.0
    acc_o = sum(o) / n if n else 0.0
    low, high = paired_bootstrap(a, o, seed=seed)
    return {"n": n, "accuracy_baseline": acc_a, "accuracy_run": acc_o, "difference": acc_o - acc_a,
            "ci_95": [low, high], "mcnemar_p": mcnemar_exact(b, c),
            "min_detectable_difference": min_detectable_difference(n, b + c),
            "baseline_only_correct": b, "run_only_correct": c,
            "won": [i for i, x, y in zip(ids, a, o) if y and not x],
            "lost": [i for i, x, y in zip(ids, a, o) if x and not y]}


def first_epoch(rows: list[dict]) -> dict[str, dict]:
    """The rows that take part in a pairing, by instance: epoch 0's (every row of a run without epochs)."""
    return {row["id"]: row for row in rows if row_key(row)[1] == 0}


def run_facts(run: Run) -> dict:
    """What a comparison says about each run on its own: epochs, flip rate, mean accuracy over the
    epochs, tokens per correct answer."""
    facts: dict = {"name": run.name, "path": str(run.path), "instances": len({row["id"] for row in run.rows}),
                   "tokens_per_correct": tokens_per_correct(run.rows),
                   "tokens_per_correct_by_role": run.summary.get("tokens_per_correct_by_role") or {}}
    if any(row.get("epoch") for row in run.rows):
        repeats = epoch_summary(run.rows)
        facts.update(epochs=repeats["epochs"], flip_rate=repeats["flip_rate"],
                     mean_accuracy_over_epochs=repeats["mean_accuracy"], clustered_95=repeats["clustered_95"])
    return facts


def compare_pair(baseline: Run, run: Run, seed: int = 0) -> dict:
    base = first_epoch(baseline.rows)
    other = first_epoch(run.rows)
    shared = [i for i in base if i in other]
    paired = [i for i in shared if not is_error(base[i]) and not is_error(other[i])]
    levels: dict[str, list[str]] = {}
    for i in paired:
        levels.setdefault(str(base[i].get("level")), []).append(i)
    return {
        "run": run.name, "baseline": baseline.name, "shared": len(shared), "paired": len(paired),
        "only_in_baseline": len(base) - len(shared), "only_in_run": len(other) - len(shared),
        "errors_excluded": {"baseline": sum(is_error(base[i]) for i in shared),
                            "run": sum(is_error(other[i]) for i in shared)},
        "overall": paired_stats(paired, base, other, seed),
        "by_level": {level: paired_stats(levels[level], base, other, seed) for level in sorted(levels)},
    }


def compare_runs(runs: list[Run], seed: int = 0, force: bool = False) -> dict:
    if len(runs) < 2:
        raise ValueError("compare needs at least two results folders")
    problems = mismatches(runs)
    if problems and not force:
        raise RunMismatch("; ".join(problems) + " (--force compares anyway)")
    comparisons = [compare_pair(runs[0], run, seed) for run in runs[1:]]
    problems += [f"{comp['run']} and {comp['baseline']} have no instance to pair" for comp in comparisons
                 if not comp["paired"]]
    return {"baseline": runs[0].name, "seed": seed, "warnings": problems,
            "runs": [run_facts(run) for run in runs],
            "comparisons": comparisons}


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
        lines += paired_lines(comp)
        lines.append("")
    lines += [run_line(facts) for facts in result["runs"]]
    return "\n".join(lines).rstrip() + "\n"


def format_mdd(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def paired_lines(comp: dict) -> list[str]:
    """The per-level table of one comparison, and the instances won and lost."""
    lines = [f"{'level':<8}{'n':>5}{'baseline':>10}{'run':>8}{'diff':>8}  {'95% CI (bootstrap)':<19}"
             f"{'McNemar p':>10}{'won':>5}{'lost':>5}{'MDD 80%':>9}"]
    for level, row in [*comp["by_level"].items(), ("overall", comp["overall"])]:
        low, high = row["ci_95"]
        lines.append(f"{level:<8}{row['n']:>5}{row['accuracy_baseline']:>10.1%}{row['accuracy_run']:>8.1%}"
                     f"{row['difference']:>+8.1%}  [{low:+.3f}, {high:+.3f}]   {format_p(row['mcnemar_p']):>10}"
                     f"{len(row['won']):>5}{len(row['lost']):>5}{format_mdd(row['min_detectable_difference']):>9}")
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
        low, high = per_correct["ci_95"]
        parts.append(f"tokens per correct answer {per_correct['tokens_per_correct']:.0f} [{low:.0f}, {high:.0f}]")
    roles = [f"{role} {part['tokens_per_correct']:.0f} [{part['ci_95'][0]:.0f}, {part['ci_95'][1]:.0f}]"
             for role, part in (facts.get("tokens_per_correct_by_role") or {}).items()
             if part.get("tokens_per_correct") is not None and part.get("ci_95")]
    if len(roles) > 1:
        parts.append("per role " + ", ".join(roles))
    if "epochs" in facts:
        low, high = facts["clustered_95"]
        parts.append(f"{facts['epochs']} epochs: mean accuracy {facts['mean_accuracy_over_epochs']:.1%} "
                     f"[{low:.3f}, {high:.3f}], flip rate {facts['flip_rate']:.1%} (paired on epoch 0)")
    return "; ".join(parts)
