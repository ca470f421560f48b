"""Where the API-Bank data lives, and the one clear error when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

#: The project checkout (the folder holding `vendor/`, `manifests/`, `bench_tests/`).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
VENDOR_DIR = PROJECT_ROOT / "vendor"
VENDORED_ROOT = VENDOR_DIR / "api-bank"
LOCK_FILE = VENDOR_DIR / "apibank.lock.json"
MANIFEST_DIR = PROJECT_ROOT / "manifests"

#: Files a usable root must have, as an upstream checkout lays them out.
LEVEL_DIRS = {
    "1": "lv1-lv2-samples/level-1-given-desc",
    "2": "lv1-lv2-samples/level-2-toolsearcher",
}
LEVEL3_FILE = "test_data/level-3.json"
INIT_DATABASE_DIR = "init_database"


class DataMissing(RuntimeError):
    """The API-Bank data root is missing or incomplete; the message says how to get it."""


def resolve_root(explicit: str | os.PathLike | None = None) -> Path:
    """`explicit` (the `root` setting, resolved by the caller), else vendor/api-bank/."""
    return Path(explicit or VENDORED_ROOT).expanduser().resolve()


def require_root(explicit: str | os.PathLike | None = None) -> Path:
    """The data root, checked to look like an upstream checkout."""
    root = resolve_root(explicit)
    needed = [root / LEVEL_DIRS["1"], root / LEVEL_DIRS["2"], root / LEVEL3_FILE, root / INIT_DATABASE_DIR]
    missing = [str(path.relative_to(root)) for path in needed if not path.exists()]
    if missing:
        raise DataMissing(
            f"API-Bank data not found at {root} (missing: {', '.join(missing)}).\n"
            "Get it with `apibank-bench data fetch` (downloads the pinned files) or "
            "`apibank-bench data fetch --from /path/to/api-bank`, "
            "or point --root (APIBANK_ROOT, --apibank-root under pytest) at an API-Bank checkout."
        )
    return root
