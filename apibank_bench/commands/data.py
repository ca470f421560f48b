"""`apibank-bench data fetch|verify`: get or check the pinned API-Bank data."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    from apibank_bench.data.lock import BASE_URL_ENV, DEFAULT_BASE_URL, WORKERS

    data = sub.add_parser("data", help="get or check the pinned API-Bank data")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="fill vendor/api-bank/ (from a local copy, or download the pinned files)")
    where = fetch.add_mutually_exclusive_group()
    where.add_argument("--from", dest="source", metavar="DIR", default=None,
                       help="copy from a local API-Bank root laid out like upstream")
    where.add_argument("--base-url", metavar="URL", default=None,
                       help=f"download each file from URL/<owner>/<repo>/<commit>/<path> (a mirror); "
                            f"default ${BASE_URL_ENV}, else {DEFAULT_BASE_URL}")
    fetch.add_argument("--dest", metavar="DIR", default=None, help="folder to fill (default vendor/api-bank)")
    fetch.add_argument("--workers", metavar="N", type=int, default=WORKERS, help=f"parallel downloads (default {WORKERS})")
    verify = data_sub.add_parser("verify", help="check every locked file; names each missing or altered one")
    verify.add_argument("root", nargs="?", default=None, help="data root to check (default vendor/api-bank)")
    data.set_defaults(func=run)


def run(args) -> int:
    return fetch(args) if args.data_command == "fetch" else verify(args.root)


def fetch(args) -> int:
    from apibank_bench.data.lock import FetchError, base_url, fetch_from_directory, fetch_from_web
    from apibank_bench.core.paths import VENDORED_ROOT

    dest = Path(args.dest) if args.dest else VENDORED_ROOT
    if args.source:
        count = fetch_from_directory(Path(args.source), dest)
        print(f"fetched {count} files into {dest}; all match vendor/apibank.lock.json")
        return 0
    base = base_url(args.base_url)
    try:
        result = fetch_from_web(dest, base=base, workers=args.workers)
    except FetchError as exc:
        print(f"apibank-bench data fetch: {exc}", file=sys.stderr)
        return 1
    print(f"downloaded {result.downloaded} files ({result.bytes / 1e6:.1f} MB) from {base}, "
          f"kept {result.kept} already present; all {result.downloaded + result.kept} in {dest} "
          "match vendor/apibank.lock.json")
    return 0


def verify(root: str | None) -> int:
    from apibank_bench.data.lock import Lock, verify as problems_at
    from apibank_bench.core.paths import VENDORED_ROOT

    target = Path(root) if root else VENDORED_ROOT
    problems = problems_at(target)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) under {target}; run `apibank-bench data fetch` to restore", file=sys.stderr)
        return 1
    print(f"ok: {len(Lock.load().files)} files under {target} match the lock")
    return 0
