"""One run per results folder: what a folder records about its run, and who may write into it.

A run writes `run.json` (its settings, when it started, any `--force`) with its first
line, so even a run killed before its summary says what it measured. Another
invocation may then:

- `--resume` it (finish what did not finish) when the settings that define the
  measurement are the same; others (endpoints, concurrency, timeouts, cache: role
  `operational`) and the selection may differ. Different measured settings are refused
  in one line naming each, unless `--force` (recorded in run.json and summary.json);
- narrow it with pytest (`--lf`, `-k`, `-m`, `--deselect`, node IDs): the instances
  that run are run again and their lines replaced, the others kept (same rule on the
  settings);
- start afresh only with `--overwrite`: a fresh run never replaces another run's
  results silently; it is refused, naming the run there and the flag.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apibank_bench.core import settings
from apibank_bench.runs.results import SUMMARY, read_record, read_rows, read_summary, write_record_file
from apibank_bench.runs.versions import UnsupportedSchemaVersion



class FolderTaken(ValueError):
    """This invocation may not write into the folder (a usage error)."""


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def stored_settings(out_dir: Path) -> dict | None:
    """The settings of the run in `out_dir`: its run.json, else its summary's `config.run`."""
    out_dir = Path(out_dir)
    try:
        record = read_record(out_dir)
        if isinstance(record, dict) and isinstance(record.get("settings"), dict):
            return record["settings"]
    except UnsupportedSchemaVersion:
        raise  # a newer release's record is refused by name, never passed over for the summary's
    except (OSError, ValueError):
        pass
    try:
        run = ((read_summary(out_dir) or {}).get("config") or {}).get("run")
    except UnsupportedSchemaVersion:
        raise
    except ValueError:
        return None
    return run if isinstance(run, dict) else None


#: Settings a resume never takes from the folder: the invocation's own, and the roles' models (recorded without
#: their endpoints, so taken they would be asked at `--base-url`: a resume of a mixed team names them again).
NOT_RESUMED = ("resume", "overwrite", "force", "out_dir", "model_role")


def resumed_settings(cfg, given: AbstractSet[str]):
    """`--resume --out-dir DIR`: the settings of the run there (run.json, else its summary) for every measured
    setting not `given`, its selection when no part of one is given, and its endpoints when recorded whole (not
    with masked credentials), so that `--resume --out-dir DIR` alone finishes a killed run. What is given stays:
    a measured setting that differs from the folder's is still refused by name (`decide`)."""
    if not (cfg.resume and cfg.out_dir) or cfg.overwrite:
        return cfg
    stored = stored_settings(Path(cfg.out_dir))
    if not stored:
        return cfg
    record = cfg.to_record()
    # The selection is one choice (`--only` without `--limit` runs every named instance): the folder's, unless
    # any part of it is given.
    selection = not any(s.name in given for s in settings.RUN_SETTINGS if s.role == settings.SELECTION)
    for setting in settings.RUN_SETTINGS:
        name = setting.name
        if name in given or name in NOT_RESUMED or name not in stored:
            continue
        if setting.role == settings.MEASUREMENT or (setting.role == settings.SELECTION and selection):
            record[name] = stored[name]
        elif name == "base_url" and not any("***" in url for url in stored[name]):
            record[name] = list(stored[name])
    return settings.from_record(record)


def holds_results(out_dir: Path) -> bool:
    out_dir = Path(out_dir)
    return bool(read_rows(out_dir)) or (out_dir / SUMMARY).is_file()


def differences(stored: dict, wanted: dict, model_files: tuple[str | None, str | None] = (None, None)) -> list[str]:
    """One phrase per measured setting that differs: `model 'gold' (this run: 'stub')`. `model_files`: the
    sha256 of the embedded model the folder's run and this one serve (`model_file`), which decides for
    `model` when both have one: the same file under two names is the same model, one name for two files is not."""
    wanted = _json(wanted)
    names = settings.differences(stored, wanted)[settings.MEASUREMENT]
    theirs, mine = model_files
    phrases = [f"{name} {stored.get(name)!r} (this run: {wanted.get(name)!r})"
               for name in names if not (name == "model" and theirs and mine)]
    if theirs and mine and theirs != mine:
        phrases.insert(0, f"the embedded model {stored.get('model') or 'default'!r}, sha256 {theirs[:12]} "
                          f"(this run: {wanted.get('model') or 'default'!r}, sha256 {mine[:12]})")
    return phrases


def model_file(cfg) -> str | None:
    """The sha256 of the embedded model a run serves; None for a remote model or the gold self-check."""
    from apibank_bench.llm.embedded_models import is_embedded_model

    if cfg.is_gold or cfg.base_url or not is_embedded_model(cfg.model):
        return None
    from apibank_bench.llm.embedded_models import embedded_choice

    return embedded_choice(cfg).sha256


def recorded_model_file(out_dir: Path, stored: dict) -> str | None:
    """The sha256 of the embedded model the folder's run served: run.json's `model_sha256`, else (a folder
    written before it was recorded) that of the shipped file its `--model` designated then."""
    from apibank_bench.llm.embedded_models import identity_of_record

    try:
        record = read_record(out_dir) or {}
    except (OSError, ValueError):
        record = {}
    recorded = record.get("model_sha256")
    return identity_of_record(stored.get("model"), recorded if isinstance(recorded, str) else None)


def other_selection(out_dir: Path, cfg) -> list[str]:
    """How the selection of the run a folder holds differs from `cfg`'s, one phrase per setting:
    `limit 2 (this run: None)`; empty when the folder records none or the same one."""
    stored = stored_settings(out_dir)
    if stored is None:
        return []
    wanted = _json(cfg.to_dict())
    return [f"{name} {stored.get(name, settings.BY_NAME[name].default)!r} (this run: {wanted.get(name)!r})"
            for name in settings.differences(stored, wanted)[settings.SELECTION]]


def describe(out_dir: Path) -> str:
    """The run in a folder, in a few words: `decentralized / stub, 3 instances`."""
    stored = stored_settings(out_dir) or {}
    rows = len({row.id for row in read_rows(out_dir)})
    what = f"{stored.get('topology', '?')} / {stored.get('model') or 'the embedded model'}" if stored else "results"
    return f"{what}, {rows} instance{'s' if rows != 1 else ''}"


@dataclass
class Decision:
    keep: bool  #: keep the folder's lines (resume or update) rather than empty it
    forced: list[str] = field(default_factory=list)  #: measured settings that differ, allowed by --force


def decide(out_dir: Path, cfg, narrowed: bool = False) -> Decision:
    """May a run with settings `cfg` write into `out_dir`, and does it keep what is there?

    `narrowed`: pytest runs only part of the selection (`--lf`, `-k`, ...). Raises
    FolderTaken with one line saying why not and what to pass instead.
    """
    out_dir = Path(out_dir)
    if cfg.overwrite or not holds_results(out_dir):
        return Decision(keep=bool(cfg.resume))
    if not (cfg.resume or narrowed):
        flag = settings.flag
        raise FolderTaken(f"{out_dir} holds another run's results ({describe(out_dir)}): {flag('overwrite')} "
                          f"replaces them, {flag('resume')} continues that run, or choose another {flag('out_dir')}")
    stored = stored_settings(out_dir)
    if stored is None:
        if cfg.force:
            return Decision(keep=True, forced=["the folder's settings (not recorded)"])
        raise FolderTaken(f"{out_dir} holds results without a record of the settings that made them; "
                          f"{settings.flag('force')} continues anyway, {settings.flag('overwrite')} replaces them")
    mine = model_file(cfg)
    differ = differences(stored, cfg.to_dict(), (recorded_model_file(out_dir, stored) if mine else None, mine))
    if differ and not cfg.force:
        verb = settings.flag("resume") if cfg.resume else "rerunning part of"
        raise FolderTaken(f"{verb} {out_dir} refused: it holds a run with other settings: {'; '.join(differ)} "
                          f"({settings.flag('force')} continues it anyway)")
    return Decision(keep=True, forced=differ)


def write_record(out_dir: Path, cfg, started_at: str, forced: list[str]) -> dict:
    """run.json: a fresh run's settings, or the forced continuations added to the old record."""
    out_dir = Path(out_dir)
    try:
        record: dict | None = dict(read_record(out_dir) or {})
    except UnsupportedSchemaVersion:
        raise
    except (OSError, ValueError):
        record = None
    if not record or "settings" not in record:
        record = {"settings": _json(cfg.to_dict()), "started_at": started_at, "forced": []}
        sha = model_file(cfg)
        if sha:  # the embedded model by its file, which a resumed run must serve again
            record["model_sha256"] = sha
    if forced:
        record.setdefault("forced", []).append({"at": started_at, "differences": forced})
    out_dir.mkdir(parents=True, exist_ok=True)
    return dict(write_record_file(out_dir, record))
