"""The public Python API (docs/api.md): run the benchmark, read a results folder, compare two folders,
score saved answers. `apibank_bench` exports these names (loaded on first use); every other name of
the package may change without notice.

Each function is what a command does, as values: `run` is `apibank-bench run` without pytest (the
headless `runs.benchmark_run.BenchmarkRun`), `compare` the paired statistics of `apibank-bench compare`,
`score_answers` what `apibank-bench score` writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from apibank_bench.core.settings import RunConfig
from apibank_bench.runs.file_models import Summary
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.versions import UnsupportedSchemaVersion

__all__ = ["Comparison", "PairedStats", "ResultRow", "Results", "RunConfig", "Summary", "UnsupportedSchemaVersion",
           "compare", "read_results", "run", "run_config", "score_answers"]


@dataclass(frozen=True)
class Results:
    """A results folder read: its rows (results.jsonl, in run order) and its summary (summary.json)."""

    folder: Path
    rows: list[ResultRow]
    summary: Summary | None  #: None for a folder whose run was killed before it wrote one

    @property
    def accuracy(self) -> float | None:
        """Correct rows over all rows (an error row counts against it), as the summary records it."""
        return None if self.summary is None else self.summary["accuracy"]


@dataclass(frozen=True)
class PairedStats:
    """Two runs on the instances both answered (epoch 0; rows that are errors in either run left out)."""

    n: int  #: paired instances
    accuracy_baseline: float
    accuracy_run: float
    difference: float  #: accuracy_run - accuracy_baseline
    ci_95: tuple[float, float]  #: seeded paired-bootstrap 95 % interval of the difference
    mcnemar_p: float  #: exact two-sided McNemar test on the discordant instances
    min_detectable_difference: float | None  #: at 80 % power for this n and discordance (None: none)
    baseline_only_correct: int
    run_only_correct: int
    won: list[str]  #: instances the run got right and the baseline wrong
    lost: list[str]  #: instances the baseline got right and the run wrong

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PairedStats:
        return cls(**{**values, "ci_95": tuple(values["ci_95"])})


@dataclass(frozen=True)
class Comparison:
    """A run against a baseline: `apibank-bench compare BASELINE RUN`, as values."""

    baseline: str  #: the baseline folder's name
    run: str
    overall: PairedStats
    by_level: dict[str, PairedStats]
    shared: int  #: instances both folders hold
    only_in_baseline: int
    only_in_run: int
    errors_excluded: int  #: shared instances left out of the pairing: an error row in either run
    notes: list[str]  #: how the selections differ, when they do
    warnings: list[str]  #: why the runs may not be comparable (with `force`), unreadable lines

    @property
    def significantly_worse(self) -> bool:
        """The run is worse than the baseline at the 5 % level (exact McNemar); compare's `--fail-if-worse 0.05`."""
        return self.overall.difference < 0 and self.overall.mcnemar_p < 0.05


def run_config(**settings: Any) -> RunConfig:
    """A run's settings: each keyword is a setting of the settings table (docs/settings.md), by its name
    (`model="gold"`, `base_url=["http://..."]`, `topology="decentralized"`, `limit=10`), parsed and checked
    as its flag's value is; a setting not given comes from its `APIBANK_*` environment variable, else its
    default. A bad value is a ValueError naming the setting. `limit` None (the default) runs every
    instance of the selection."""
    from apibank_bench.core import settings as table
    from apibank_bench.runs.setting_rules import hand_down

    hand_down()  # the API is a composition root: the settings get the choices and rules the layers own

    unknown = sorted(set(settings) - {setting.name for setting in table.RUN_SETTINGS})
    if unknown:
        raise ValueError(f"no such setting: {', '.join(unknown)} (the settings: docs/settings.md)")
    return table.from_environment(**settings)


def run(config: RunConfig | None = None, /, **settings: Any) -> Results:
    """Run the benchmark headless, without pytest, and return the folder it wrote (`out_dir`, else a
    folder named from the settings under results/apibank/, as `apibank-bench run` names it).

    Give a `RunConfig` (`run_config(...)`) or the settings as keywords. The folder rules of the command
    hold: a folder holding another run is refused (`runs.folder.FolderTaken`, a ValueError) unless
    `resume=True` or `overwrite=True`. Endpoint failures are error rows, never wrong answers. `baseline`
    (the pytest gate) is refused: `compare` judges a run against a baseline."""
    from apibank_bench.runs.benchmark_run import BenchmarkRun

    if config is not None and settings:
        raise TypeError("run: give a RunConfig or settings as keywords, not both")
    cfg = config if config is not None else run_config(**settings)
    if cfg.baseline:  # the gate judges under pytest; here a setting that did nothing would be a guess
        raise ValueError(f"run: baseline={cfg.baseline!r} is the pytest gate's setting; in Python compare the "
                         "run's folder with the baseline: compare(baseline, run(...).folder)")
    bench = BenchmarkRun(cfg)
    bench.open_folder()
    bench.solve()
    return read_results(bench.out_dir)


def read_results(folder: str | Path) -> Results:
    """A results folder's rows and summary. FileNotFoundError if it holds no results.jsonl; a file of a
    schema version this release does not read is refused by name (UnsupportedSchemaVersion); files
    written before schema versions are read as version 1."""
    from apibank_bench.runs.results import RESULTS, read_rows, read_summary

    folder = Path(folder)
    if not (folder / RESULTS).is_file():
        raise FileNotFoundError(f"{folder} is not a results folder (no {RESULTS})")
    return Results(folder, read_rows(folder), cast("Summary | None", read_summary(folder)))


def compare(baseline: str | Path, other: str | Path, *, seed: int = 0, force: bool = False) -> Comparison:
    """The paired statistics of `other` against `baseline` (two results folders), as `apibank-bench compare`
    computes them. Runs whose data, manifest or ToolSearcher scorer differ are refused
    (`reports.pairs.RunMismatch`, a ValueError) unless `force`."""
    from apibank_bench.reports.compare import compare as compare_folders

    result = compare_folders([baseline, other], seed=seed, force=force)
    [pair] = result["comparisons"]
    return Comparison(baseline=pair["baseline"], run=pair["run"], overall=PairedStats.from_dict(pair["overall"]),
                      by_level={level: PairedStats.from_dict(part) for level, part in pair["by_level"].items()},
                      shared=pair["shared"], only_in_baseline=pair["only_in_baseline"],
                      only_in_run=pair["only_in_run"], errors_excluded=pair["errors_excluded"],
                      notes=list(pair["notes"]), warnings=list(result["warnings"]))


def score_answers(answers: str | Path, out_dir: str | Path, *, level: str | None = None,
                  toolsearcher_scorer: str | None = None, root: str | Path | None = None) -> Results:
    """Score saved answers (a JSONL file of `{"id": ..., "prediction": ...}` lines, e.g. a run's
    predictions.jsonl) into the results folder `out_dir`, as `apibank-bench score` does. `level`: the
    level of IDs without a `level-N::` prefix."""
    from apibank_bench.runs.results import score_predictions_file
    from apibank_bench.runs.setting_rules import hand_down

    hand_down()  # the ToolSearcher scorers' names

    score_predictions_file(Path(answers), Path(out_dir), level=level, toolsearcher_scorer=toolsearcher_scorer,
                           root=root)
    return read_results(out_dir)
