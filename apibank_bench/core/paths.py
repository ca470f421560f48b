"""Where the API-Bank data lives, and the one clear error when it is missing.

The package carries everything a run reads (the pinned API-Bank data, its lock, the manifests), so an
installed wheel runs from any folder; nothing here is found through a checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The folder above the package: the source checkout (README, docs/, tests/) when the package runs from
#: one, site-packages when installed. Only the checkout's own tools read through it (`in_checkout`).
PROJECT_ROOT = PACKAGE_DIR.parent
DATA_DIR = PACKAGE_DIR / "data"
PACKAGED_ROOT = DATA_DIR / "api-bank"  #: the pinned API-Bank data, shipped in the package (Apache-2.0)
LOCK_FILE = DATA_DIR / "apibank.lock.json"
MANIFEST_DIR = DATA_DIR / "manifests"
FETCH_DEST = Path("api-bank")  #: where `data fetch` puts a copy by default: under the working directory

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
    """`explicit` (the `root` setting, resolved by the caller), else the data shipped in the package."""
    return Path(explicit or PACKAGED_ROOT).expanduser().resolve()


def require_root(explicit: str | os.PathLike | None = None) -> Path:
    """The data root, checked to look like an upstream checkout."""
    root = resolve_root(explicit)
    needed = [root / LEVEL_DIRS["1"], root / LEVEL_DIRS["2"], root / LEVEL3_FILE, root / INIT_DATABASE_DIR]
    missing = [str(path.relative_to(root)) for path in needed if not path.exists()]
    if missing:
        raise DataMissing(
            f"API-Bank data not found at {root} (missing: {', '.join(missing)}).\n"
            "Point --root (APIBANK_ROOT, --apibank-root under pytest) at an API-Bank checkout, or leave it "
            "unset to use the data shipped with the package; `apibank-bench data fetch --dest DIR` "
            "downloads the pinned files."
        )
    return root


def import_root() -> Path:
    """The folder the running `apibank_bench` package is imported from (its checkout, or site-packages for an
    installed wheel), asked of the package itself: first on a child interpreter's path, it runs this very package
    (a sweep's cells, a Slurm job's)."""
    package = sys.modules[__name__.partition(".")[0]]  # imported already: this module is part of it
    return Path(str(package.__file__)).resolve().parent.parent


def in_checkout() -> bool:
    """Whether the package runs from its source checkout (an editable install), not from site-packages."""
    return (PROJECT_ROOT / "pyproject.toml").is_file() and (PROJECT_ROOT / ".git").exists()
