#!/usr/bin/env python
"""What the installed plugin costs a project that does not run the benchmark (issue 37: its start-up is lazy).

A small unrelated project (20 test modules of 10 tests each, in a temporary folder outside the checkout)
is collected with `pytest --collect-only -q`, alternately with the package's plugins loaded (as an install
registers them: the `pytest11` entry points) and blocked (`-p no:apibank_bench.plugin -p
no:apibank_bench.reports.gate`, which is what an environment without the package loads). Each process is
timed from outside (wall and CPU seconds, peak memory) `--repeats` times; the table gives medians and the
ratio with/without, the peer measured in the same run. It also lists which of the package's modules the
plugin session imported (`python -X importtime`): the heavy layers must not be among them.

    python benchmarks/bench_plugin_cost.py [--repeats 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BLOCKED = ["-p", "no:apibank_bench.plugin", "-p", "no:apibank_bench.reports.gate"]
#: langsmith's pytest plugin (pulled in by langgraph) costs seconds a start either way; both sides block it.
COMMON = ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin"]


def make_project(root: Path, modules: int = 20, tests: int = 10) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    for index in range(modules):
        body = "\n".join(f"def test_{index}_{case}():\n    assert {case} + 1 > {case}\n" for case in range(tests))
        (root / "tests" / f"test_mod{index}.py").write_text(body)


def timed(argv: list[str], cwd: Path) -> tuple[float, float, float]:
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def imported(argv: list[str], cwd: Path) -> list[str]:
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, capture_output=True, text=True)
    names = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return sorted({name for name in names if name.startswith("apibank_bench")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        make_project(project)
        sides = {"with the plugin": [sys.executable, *COMMON], "without": [sys.executable, *COMMON, *BLOCKED]}
        times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
        for _ in range(args.repeats):  # alternated, so that a busy moment of the machine hits both sides
            for name, argv in sides.items():
                times[name].append(timed(argv, project))
        modules = imported(sides["with the plugin"], project)
    result = {name: {"wall_s": statistics.median(t[0] for t in runs), "cpu_s": statistics.median(t[1] for t in runs),
                     "peak_mb": statistics.median(t[2] for t in runs)} for name, runs in times.items()}
    with_, without = result["with the plugin"], result["without"]
    result["ratio"] = {key: with_[key] / without[key] for key in ("wall_s", "cpu_s", "peak_mb")}
    result["apibank_modules_imported"] = modules
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"pytest --collect-only of a 200-test project, median of {args.repeats} (alternated)")
    print(f"{'':18}{'wall s':>9}{'CPU s':>9}{'peak MB':>9}")
    for name in sides:
        row = result[name]
        print(f"{name:18}{row['wall_s']:9.3f}{row['cpu_s']:9.3f}{row['peak_mb']:9.1f}")
    ratio = result["ratio"]
    print(f"{'ratio':18}{ratio['wall_s']:9.3f}{ratio['cpu_s']:9.3f}{ratio['peak_mb']:9.3f}")
    print(f"the package's modules the plugin session imported: {', '.join(modules)}")


if __name__ == "__main__":
    main()
