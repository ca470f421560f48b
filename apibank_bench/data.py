"""The pinned API-Bank data: the lock file, `data fetch` and `data verify`.

`vendor/apibank.lock.json` names every file the suite reads, with the
repository and commit it comes from, its path there, and its sha256. Fetching
from a local copy or from the pinned archives checks every file against it.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .paths import LOCK_FILE, VENDORED_ROOT

ARCHIVE_URL = "https://github.com/{repository}/archive/{commit}.tar.gz"


@dataclass(frozen=True)
class LockedFile:
    path: str  #: path under the data root (upstream's api-bank layout)
    source: str  #: key into the lock's sources
    source_path: str  #: path inside the source repository
    sha256: str


@dataclass(frozen=True)
class Lock:
    sources: dict
    files: tuple[LockedFile, ...]

    @classmethod
    def load(cls, path: Path = LOCK_FILE) -> "Lock":
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        files = tuple(LockedFile(**item) for item in raw["files"])
        return cls(raw["sources"], files)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(root: Path, lock: Lock | None = None) -> list[str]:
    """Problems with the data at `root`, one line per missing or altered file (empty = fine)."""
    lock = lock or Lock.load()
    problems = []
    for item in lock.files:
        target = Path(root) / item.path
        if not target.is_file():
            problems.append(f"missing: {item.path}")
        elif sha256_of(target) != item.sha256:
            problems.append(f"altered: {item.path} (sha256 differs from the lock)")
    return problems


def _install(data: bytes, item: LockedFile, dest: Path, origin: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != item.sha256:
        raise ValueError(f"{item.path} from {origin} does not match the lock (sha256 {actual[:12]}..., "
                         f"expected {item.sha256[:12]}...)")
    target = dest / item.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def fetch_from_directory(source: Path, dest: Path = VENDORED_ROOT, lock: Lock | None = None) -> int:
    """Copy the locked files from a local API-Bank root (laid out like upstream) into `dest`."""
    lock = lock or Lock.load()
    source = Path(source)
    missing = [item.path for item in lock.files if not (source / item.path).is_file()]
    if missing:
        raise FileNotFoundError(f"{source} lacks {len(missing)} locked file(s), e.g. {missing[0]}")
    for item in lock.files:
        _install((source / item.path).read_bytes(), item, dest, str(source))
    return len(lock.files)


def fetch_from_archives(dest: Path = VENDORED_ROOT, lock: Lock | None = None, progress=print) -> int:
    """Download each pinned source archive once and extract the locked files from it."""
    lock = lock or Lock.load()
    count = 0
    for key, source in lock.sources.items():
        wanted = {item.source_path: item for item in lock.files if item.source == key}
        if not wanted:
            continue
        url = ARCHIVE_URL.format(**source)
        progress(f"downloading {source['repository']}@{source['commit'][:12]} ({len(wanted)} files)")
        with tempfile.TemporaryFile() as spool:
            with urllib.request.urlopen(url, timeout=120) as response:
                shutil.copyfileobj(response, spool)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:gz") as archive:
                for member in archive:
                    # Archive members are "<repo>-<commit>/<path>"; strip the top folder.
                    inner = member.name.split("/", 1)[-1]
                    item = wanted.pop(inner, None)
                    if item is None or not member.isfile():
                        continue
                    data = archive.extractfile(member).read()
                    _install(data, item, dest, url)
                    count += 1
        if wanted:
            raise FileNotFoundError(f"{url} lacks {len(wanted)} locked file(s), e.g. {next(iter(wanted))}")
    return count


def write_lock(root: Path, sources: dict, assign, out: Path = LOCK_FILE) -> None:
    """Maintainers' tool: pin the data files under `root`. `assign(path) -> (source, source_path)`."""
    files = []
    patterns = ["lv1-lv2-samples/level-1-given-desc/*.jsonl", "lv1-lv2-samples/level-2-toolsearcher/*.jsonl",
                "test_data/level-3.json", "init_database/*.json"]
    for pattern in patterns:
        for path in sorted(Path(root).glob(pattern)):
            rel = path.relative_to(root).as_posix()
            source, source_path = assign(rel)
            files.append({"path": rel, "source": source, "source_path": source_path, "sha256": sha256_of(path)})
    payload = {"comment": "Every API-Bank file the suite reads, pinned. Regenerate only on purpose.",
               "sources": sources, "files": files}
    Path(out).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def main_fetch(source: str | None, dest: Path = VENDORED_ROOT) -> int:
    if source:
        count = fetch_from_directory(Path(source), dest)
    else:
        count = fetch_from_archives(dest)
    print(f"fetched {count} files into {dest}; all match vendor/apibank.lock.json")
    return 0


def main_verify(root: str | None) -> int:
    target = Path(root) if root else VENDORED_ROOT
    problems = verify(target)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) under {target}; run `apibank-bench data fetch` to restore", file=sys.stderr)
        return 1
    print(f"ok: {len(Lock.load().files)} files under {target} match the lock")
    return 0
