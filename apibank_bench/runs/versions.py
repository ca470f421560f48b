"""Which form of each result file this release writes, and which forms it reads.

Every result file names its form in a top-level `schema_version` (an int): each results.jsonl and
predictions.jsonl line, summary.json, run.json and each trace. A version changes when a field is
removed, renamed or changes its meaning; a field added within a version is additive (readers
ignore keys they do not know), so it needs no new version.

A reader given a file of a version it does not read refuses it by name (`UnsupportedSchemaVersion`:
the file, its version, the versions this release reads) rather than guess at its fields. A file
without the key was written before versions existed (apibank-bench 0.1.0 before issue 37); version
1 is exactly that form with the key added, so such a file is read as version 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


RESULTS_ROW = "results.jsonl"
PREDICTION_LINE = "predictions.jsonl"
SUMMARY = "summary.json"
RUN_RECORD = "run.json"
TRACE = "traces/<id>.json"
KINDS = (RESULTS_ROW, PREDICTION_LINE, SUMMARY, RUN_RECORD, TRACE)

#: The version each file is written in by this release.
WRITES: dict[str, int] = {kind: 1 for kind in KINDS}
#: Older versions this release still reads, each with what turns it into the version written
#: (none yet: version 1 is the first; a file without the key is version 1's form).
UPGRADES: dict[str, dict[int, Callable[[dict], dict]]] = {kind: {} for kind in KINDS}
VERSION_KEY = "schema_version"


class UnsupportedSchemaVersion(ValueError):
    """A result file of a version this release does not read (a newer release's, or not a version)."""

    def __init__(self, source: str, kind: str, version: Any) -> None:
        self.source, self.kind, self.version = source, kind, version
        readable = ", ".join(map(str, readable_versions(kind)))
        super().__init__(f"{source}: schema_version {version!r} of {kind} is not one this release "
                         f"({_release()}) reads: it reads versions {readable}, and files without "
                         f"schema_version (written before versions); a newer apibank-bench may read it")


def _release() -> str:
    """This release's name, from the installed metadata (the package's top is not imported here: the
    public API there imports this layer)."""
    from importlib import metadata

    try:
        return f"apibank-bench {metadata.version('apibank-bench')}"
    except metadata.PackageNotFoundError:
        return "apibank-bench"


def readable_versions(kind: str) -> list[int]:
    return sorted({WRITES[kind], *UPGRADES[kind]})


def read_version(data: Any, kind: str, source: str) -> int:
    """The version of one file's JSON object (`data`): 1 when it has none (written before versions).
    Raises UnsupportedSchemaVersion for a version this release does not read."""
    if not isinstance(data, dict) or VERSION_KEY not in data:
        return 1
    version = data[VERSION_KEY]
    if type(version) is not int or version not in readable_versions(kind):  # noqa: E721 - True is no version
        raise UnsupportedSchemaVersion(source, kind, version)
    return version


def upgraded(data: dict, kind: str, source: str) -> dict:
    """`data` in the form this release writes: checked (`read_version`), an older known form upgraded."""
    version = read_version(data, kind, source)
    return data if version == WRITES[kind] else UPGRADES[kind][version](data)


def stamped(data: dict, kind: str) -> dict:
    """`data` with this release's `schema_version` for `kind` as its first key (a JSON document's)."""
    return {VERSION_KEY: WRITES[kind], **{key: value for key, value in data.items() if key != VERSION_KEY}}


def stamped_last(data: dict, kind: str) -> dict:
    """`data` with this release's `schema_version` for `kind` as its last key (a JSONL line's: the line's
    columns keep their places)."""
    return {**{key: value for key, value in data.items() if key != VERSION_KEY}, VERSION_KEY: WRITES[kind]}


def read_json_file(path: Path, kind: str) -> Any:
    """One result file's JSON, in the form this release writes (`upgraded`); ValueError if it is not JSON,
    UnsupportedSchemaVersion (a ValueError) if it is of a version this release does not read."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return upgraded(data, kind, str(path)) if isinstance(data, dict) else data
