"""Check a built wheel and sdist (scripts/check-wheel): the data, manifests, schemas and the benchmark's
module are inside, nothing of the checkout's own leaks in, and the runtime requirements pin nothing.

    python scripts/check_dist.py DIST_DIR
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGE = "apibank_bench"
#: Folders and files of the checkout that are not the package: none may be in the wheel.
NOT_IN_WHEEL = ("tests/", "bench_tests/", "docs/", "scripts/", "benchmarks/", ".ci/", "conftest.py", "vendor/",
                "results/", ".venv/")


def needed_files() -> list[str]:
    """Every file a run reads, as the wheel must hold it (relative to site-packages)."""
    lock = json.loads((CHECKOUT / PACKAGE / "data" / "apibank.lock.json").read_text(encoding="utf-8"))
    data = [f"{PACKAGE}/data/api-bank/{entry['path']}" for entry in lock["files"]]
    shipped = [path.relative_to(CHECKOUT).as_posix() for pattern in
               ("data/*.json", "data/manifests/*.json", "prompts/**/*.txt", "bench/*.py", "**/schemas/*.json")
               for path in (CHECKOUT / PACKAGE).glob(pattern)]
    return [*data, f"{PACKAGE}/data/api-bank/LICENSE", f"{PACKAGE}/data/api-bank/NOTICE", *shipped]


def check_wheel(wheel: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        meta_name = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(meta_name).decode("utf-8"))
        entry_points = archive.read(meta_name.replace("METADATA", "entry_points.txt")).decode("utf-8")
    missing = [name for name in needed_files() if name not in names]
    if missing:
        problems.append(f"{wheel.name}: {len(missing)} needed files missing, e.g. {missing[:3]}")
    leaked = sorted(name for name in names if name.startswith(NOT_IN_WHEEL))
    if leaked:
        problems.append(f"{wheel.name}: checkout files leaked in: {leaked[:5]}")
    if not any("/schemas/" in name and name.endswith(".json") for name in names):
        problems.append(f"{wheel.name}: no JSON Schema of the result files (a schemas/ folder)")
    for requirement in metadata.get_all("Requires-Dist") or []:
        core = "extra ==" not in requirement
        if core and re.search(r"===?", requirement.split(";")[0]):
            problems.append(f"{wheel.name}: the runtime requirement {requirement!r} is an exact pin")
    if "[pytest11]" not in entry_points or "apibank_bench.plugin = apibank_bench.plugin" not in entry_points:
        problems.append(f"{wheel.name}: no pytest11 entry point for apibank_bench.plugin")
    print(f"{wheel.name}: {len(names)} files, {sum(1 for n in names if '/data/api-bank/' in n)} API-Bank data files")
    return problems


def check_sdist(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    problems = []
    missing = [name for name in needed_files() if name not in names]
    if missing:
        problems.append(f"{sdist.name}: {len(missing)} needed files missing, e.g. {missing[:3]}")
    leaked = sorted(name for name in names if name.startswith((".venv/", "results/", ".git/")))
    if leaked:
        problems.append(f"{sdist.name}: leaked: {leaked[:5]}")
    print(f"{sdist.name}: {len(names)} files")
    return problems


def main(dist: Path) -> int:
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}", file=sys.stderr)
        return 1
    problems = check_wheel(wheels[0]) + check_sdist(sdists[0])
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
