"""`apibank-bench data fetch|verify`: get or check the pinned API-Bank data."""

from __future__ import annotations


def register(sub) -> None:
    data = sub.add_parser("data", help="get or check the pinned API-Bank data")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="fill vendor/api-bank/ (from a local copy, or download the pinned files)")
    fetch.add_argument("--from", dest="source", default=None, help="a local API-Bank root laid out like upstream")
    verify = data_sub.add_parser("verify", help="check every locked file; names each missing or altered one")
    verify.add_argument("root", nargs="?", default=None, help="data root to check (default vendor/api-bank)")
    data.set_defaults(func=run)


def run(args) -> int:
    from .. import data

    if args.data_command == "fetch":
        return data.main_fetch(args.source)
    return data.main_verify(args.root)
