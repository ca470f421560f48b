"""`apibank-bench merge`: the shards of one run joined into one results folder that *is* that run.

Each folder must hold a run (its rows, with the settings in run.json or summary.json), and all
must be shards of one run: the same measured settings and the same selection but for `--shard`.
The merged folder gets their lines (unreadable ones set aside, never dropped) and traces, a
run.json with the whole run's settings (no shard), so it can be resumed, gated and compared as a
run, and a summary counted against the whole run's selection: a shard left out is `not_run`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from apibank_bench.core import settings
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import run_cases, split_case
from apibank_bench.runs.folder import differences, holds_results, stored_settings
from apibank_bench.runs.provenance import now
from apibank_bench.runs.results import (PREDICTIONS, RESULTS, TRACES, UNREADABLE, RunFiles, read_record,
                                        read_summary, write_record_file)


class MergeRefused(ValueError):
    """The folders cannot be merged into one run (a usage error)."""


def shard_of(directory: Path) -> dict:
    """The settings of the run a folder holds; MergeRefused if it does not exist or holds no run."""
    if not directory.is_dir():
        raise MergeRefused(f"{directory} does not exist")
    stored = stored_settings(directory)
    if not (directory / RESULTS).is_file() or stored is None:
        raise MergeRefused(f"{directory} holds no run (no {RESULTS} with the run.json or summary.json "
                           "that records its settings)")
    return stored


def whole_run(dirs: list[Path]) -> dict:
    """The settings of the run the folders are shards of (its shard unset); MergeRefused if they are not."""
    shards = [shard_of(directory) for directory in dirs]
    first = shards[0]
    seen: set = set()
    for directory, stored in zip(dirs, shards):
        other = [name for name in settings.differences(first, stored)[settings.SELECTION] if name != "shard"]
        problems = differences(first, stored) + [f"{name} {first.get(name)!r} vs {stored.get(name)!r}"
                                                  for name in other]
        if problems:
            raise MergeRefused(f"{directory} is not a shard of the run in {dirs[0]}: {'; '.join(problems)}")
        shard = json.dumps(stored.get("shard"))
        if shard in seen:
            raise MergeRefused(f"{directory}: shard {stored.get('shard')} is given twice")
        seen.add(shard)
    return {**first, "shard": None}


def merge(dirs: list[Path], out: Path) -> dict:
    """Join shard folders `dirs` into `out` (which must hold no results); returns the merged summary."""
    dirs, out = [Path(d) for d in dirs], Path(out)
    whole = whole_run(dirs)
    if holds_results(out):
        raise MergeRefused(f"{out} holds results already: merge into a new folder")
    cfg = settings.from_record(whole)
    cases = run_cases(select(cfg.level, cfg.limit, cfg.offset, cfg.only or None), cfg.epochs)
    files = RunFiles(out)
    for directory in dirs:
        for name in (PREDICTIONS, RESULTS, PREDICTIONS + UNREADABLE, RESULTS + UNREADABLE):
            source = directory / name
            if source.is_file():  # bytes as they are: finalize sets aside what cannot be read
                data = source.read_bytes()
                with open(out / name, "ab") as handle:
                    handle.write(data if not data or data.endswith(b"\n") else data + b"\n")
        for trace in (directory / TRACES).glob("*.json"):
            shutil.copy2(trace, out / TRACES / trace.name)
    records = [read_record(d) or {} for d in dirs]
    started = min((r["started_at"] for r in records if r.get("started_at")), default=now())
    merged_from = [str(directory) for directory in dirs]
    write_record_file(out, {"settings": whole, "started_at": started, "merged_from": merged_from,
                            "forced": [f for r in records for f in r.get("forced", [])]})
    config = dict(((read_summary(dirs[0]) or {}).get("config")) or {})
    config.update(run=whole, merged_from=merged_from)
    selection = {"cases": len(cases), "instances": len({split_case(case)[0] for case in cases}), "epochs": cfg.epochs}
    return files.finalize(cases, config=config, extra={"merged_from": merged_from, "selection": selection})
