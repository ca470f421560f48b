"""The pinned API-Bank data: the lock file, `data fetch` and `data verify`.

`apibank.lock.json` (beside the packaged data) names every file the suite reads, with the
repository and commit it comes from, its path there, and its sha256. Fetching
from a local copy, or downloading each file at its pinned commit, checks every
file against it before it is put in place.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TextIO, TypedDict

from apibank_bench.core.paths import FETCH_DEST, LOCK_FILE
from apibank_bench.core.retry import RetryPolicy
from apibank_bench.core.settings import BY_NAME

#: GitHub serves a file of a commit at <this>/<owner>/<repo>/<commit>/<path> (the `data_base_url` setting).
DEFAULT_BASE_URL = BY_NAME["data_base_url"].default
WORKERS = BY_NAME["downloads"].default
ATTEMPTS = 4  #: tries per file; pauses of about BACKOFF, 2x, 4x seconds between them (the suite's retry policy)
BACKOFF = 0.5
TIMEOUT = 60  #: seconds without a byte before a try counts as failed
PART_SUFFIX = ".part"


class Source(TypedDict):
    """A repository the locked files come from (the lock's `sources`)."""

    repository: str  #: owner/name on GitHub
    commit: str
    subdir: str  #: where the api-bank layout is inside it
    why: NotRequired[str]  #: why this source, when it is not the obvious one


@dataclass(frozen=True)
class LockedFile:
    path: str  #: path under the data root (upstream's api-bank layout)
    source: str  #: key into the lock's sources
    source_path: str  #: path inside the source repository
    sha256: str


@dataclass(frozen=True)
class Lock:
    sources: dict[str, Source]
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


def fetch_from_directory(source: Path, dest: Path = FETCH_DEST, lock: Lock | None = None) -> int:
    """Copy the locked files from a local API-Bank root (laid out like upstream) into `dest`."""
    lock = lock or Lock.load()
    source = Path(source)
    missing = [item.path for item in lock.files if not (source / item.path).is_file()]
    if missing:
        raise FileNotFoundError(f"{source} lacks {len(missing)} locked file(s), e.g. {missing[0]}")
    for item in lock.files:
        _install((source / item.path).read_bytes(), item, dest, str(source))
    return len(lock.files)


class FetchError(RuntimeError):
    """A locked file could not be downloaded, or arrived different; the message names it."""


def file_url(base: str, source: Source, source_path: str) -> str:
    """`<base>/<owner>/<repo>/<commit>/<path>`: GitHub's raw-file layout, which a mirror copies."""
    return f"{base}/{source['repository']}/{source['commit']}/{urllib.parse.quote(source_path)}"


class Progress:
    """Files done of total and megabytes, redrawn in place on a terminal (silent otherwise)."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.done, self.bytes = total, 0, 0
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return f"{self.done}/{self.total} files, {self.bytes / 1e6:.1f} MB"

    def add(self, size: int) -> None:
        with self._lock:
            self.done += 1
            self.bytes += size
            if self.live:
                self.stream.write(f"\rdownloading: {self}")
                self.stream.flush()

    def close(self) -> None:
        if self.live and self.done:
            self.stream.write("\n")


def _is_installed(dest: Path, item: LockedFile) -> bool:
    target = dest / item.path
    return target.is_file() and sha256_of(target) == item.sha256


def _download_once(opener: urllib.request.OpenerDirector, url: str, item: LockedFile, target: Path) -> int:
    """Stream `url` into a hidden file beside `target`, check its sha256, then rename it into place."""
    try:
        response = opener.open(url, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        exc.close()  # nothing more is read from a refusal
        raise
    with response:
        fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PART_SUFFIX)
        try:
            digest, size = hashlib.sha256(), 0
            with os.fdopen(fd, "wb") as out:
                for block in iter(lambda: response.read(1 << 16), b""):
                    digest.update(block)
                    out.write(block)
                    size += len(block)
            if digest.hexdigest() != item.sha256:
                raise FetchError(f"{item.path}: {url} sent {size} bytes with sha256 {digest.hexdigest()[:12]}..., "
                                 f"the lock says {item.sha256[:12]}...; not installed")
            os.replace(part, target)  # atomic: readers see the old file or the whole new one
            return size
        finally:
            Path(part).unlink(missing_ok=True)


def _worth_retrying(exc: BaseException) -> bool:
    """Server errors, rate limits and broken connections; not a refusal (404, 403) or a wrong file."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    return isinstance(exc, (OSError, http.client.HTTPException))  # URLError, timeouts, resets, short bodies


def _download(opener: urllib.request.OpenerDirector, url: str, item: LockedFile, target: Path, attempts: int,
              backoff: float) -> int:
    """One file, under the suite's retry policy (tenacity's): `attempts` tries, doubling pauses."""
    policy = RetryPolicy(max_retries=attempts - 1, base_delay=backoff, retryable=_worth_retrying)
    try:
        return policy.call(_download_once, opener, url, item, target)
    except urllib.error.HTTPError as exc:
        if not _worth_retrying(exc):  # not found or refused: asking again would not help
            raise FetchError(f"{item.path}: {url} answered HTTP {exc.code} {exc.reason}") from None
        last = f"HTTP {exc.code} {exc.reason}"
    except (OSError, http.client.HTTPException) as exc:
        last = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
    raise FetchError(f"{item.path}: {url} failed {attempts} times (last: {last})")


def _remove_partials(dest: Path, lock: Lock) -> None:
    """Hidden part files a killed fetch left behind."""
    for folder in {(dest / item.path).parent for item in lock.files}:
        for part in folder.glob(f".*{PART_SUFFIX}"):
            part.unlink(missing_ok=True)


@dataclass(frozen=True)
class FetchResult:
    downloaded: int
    kept: int
    bytes: int


def fetch_from_web(dest: Path = FETCH_DEST, lock: Lock | None = None, base: str | None = None,
                   workers: int = WORKERS, attempts: int = ATTEMPTS, backoff: float = BACKOFF,
                   progress: Progress | None = None) -> FetchResult:
    """Download each locked file that is missing or altered under `dest`, at its pinned commit.

    Files already matching the lock are kept, so an interrupted fetch resumes. The first file
    that fails for good stops the rest (those in flight finish); the error names it.
    """
    lock = lock or Lock.load()
    base = (base or DEFAULT_BASE_URL).rstrip("/")
    dest = Path(dest)
    _remove_partials(dest, lock)
    todo = [item for item in lock.files if not _is_installed(dest, item)]
    progress = progress or Progress(len(todo))
    # build_opener() reads HTTPS_PROXY / HTTP_PROXY / NO_PROXY now (urlopen's cached opener would not).
    opener = urllib.request.build_opener()
    stop = threading.Event()

    def fetch_one(item: LockedFile) -> None:
        if stop.is_set():
            return
        target = dest / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        url = file_url(base, lock.sources[item.source], item.source_path)
        try:
            progress.add(_download(opener, url, item, target, attempts, backoff))
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(fetch_one, item) for item in todo]
        try:
            wait(futures)
        except BaseException:  # Ctrl-C: let the files in flight finish, start no more
            stop.set()
            raise
    progress.close()
    failures = [str(future.exception()) for future in futures if future.exception()]
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise FetchError(f"{failures[0]}{more}; {progress.done} of {len(todo)} files downloaded, "
                         "run `apibank-bench data fetch` again to resume")
    return FetchResult(downloaded=len(todo), kept=len(lock.files) - len(todo), bytes=progress.bytes)
