"""`apibank-bench data fetch|verify`: get or check the pinned API-Bank data."""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core import settings


def register(sub) -> None:
    data = sub.add_parser("data", help="get or check the pinned API-Bank data")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="make a copy of the pinned data (from a local copy, or download the pinned files)")
    fetch.add_argument("--from", dest="source", metavar="DIR", default=None,
                       help="copy from a local API-Bank root laid out like upstream (instead of downloading)")
    fetch.add_argument("--dest", metavar="DIR", default=None, help="folder to fill (default ./api-bank); point --root at it")
    settings.add_command_flags(fetch, "data", skip=("root",))
    verify = data_sub.add_parser("verify", help="check every locked file; names each missing or altered one")
    settings.add_command_flags(verify, "data", skip=("data_base_url", "downloads"))
    data.set_defaults(func=run)


def run(args) -> int:
    values = settings.command_values(args, "data")
    return fetch(args, values) if args.data_command == "fetch" else verify(values.root)


def fetch(args, values) -> int:
    from apibank_bench.core.paths import FETCH_DEST
    from apibank_bench.data.lock import FetchError, fetch_from_directory, fetch_from_web

    dest = Path(args.dest) if args.dest else FETCH_DEST
    if args.source:
        count = fetch_from_directory(Path(args.source), dest)
        print(f"fetched {count} files into {dest}; all match the lock (apibank.lock.json)")
        return 0
    base = values.data_base_url.rstrip("/")
    try:
        result = fetch_from_web(dest, base=base, workers=values.downloads)
    except FetchError as exc:
        print(f"apibank-bench data fetch: {exc}", file=sys.stderr)
        return 1
    print(f"downloaded {result.downloaded} files ({result.bytes / 1e6:.1f} MB) from {base}, "
          f"kept {result.kept} already present; all {result.downloaded + result.kept} in {dest} "
          "match the lock (apibank.lock.json)")
    return 0


def verify(root: str | None) -> int:
    from apibank_bench.core.paths import resolve_root
    from apibank_bench.data.lock import Lock, verify as problems_at

    target = resolve_root(root)
    problems = problems_at(target)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) under {target}; run `apibank-bench data fetch` to restore", file=sys.stderr)
        return 1
    print(f"ok: {len(Lock.load().files)} files under {target} match the lock")
    return 0
