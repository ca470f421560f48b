#!/usr/bin/env python
"""How fast each command starts, and the pool's gold-replay summary against the reference harness's.

Each command runs as its own process (as a user types it), `--repeats` times; the table gives
the median and the fastest wall time, the CPU time (user + system: what wall time is on an idle
machine; on a loaded one wall time also waits for a core), the peak memory (max RSS) and whether
the process imported
anything heavy (the model layer, LangGraph, openai, an optimizer: read from `python -X importtime`).
The commands that need files (`score`, `compare`) get two gold answers scored beforehand.

The pool's gold-replay summary is three `apibank-bench summary --level N` processes (the curated
lists: 100 + 100 + 245 tasks), one after the other. With `--reference DIR` (a checkout of
juyangbai/MAS-PromptBench, e.g. `git archive` of the fetched repository), the reference harness's
`topologies/single/apibank/langgraph_apibank.py --summary --level N --limit <size>` runs the same
three in turn, alternating with ours, and the ratio is of the medians.

    python benchmarks/bench_startup.py [--repeats 5] [--reference DIR [--reference-repeats 1]] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
HEAVY = re.compile(r"(openai|langgraph|agents|torch|sentence_transformers|dspy|gepa|litellm"
                   r"|apibank_bench\.(llm|agents|optimize\.(gepa_method|mipro|maspo|job)))(\.|$)")
#: The pool: each level's curated list, and its size (the reference's --limit for the same list).
POOL = {"1": 100, "2": 100, "3": 245}
REFERENCE_SCRIPT = "topologies/single/apibank/langgraph_apibank.py"


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MB) of one process."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def heavy_imports(argv: list[str], env: dict) -> list[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], cwd=PROJECT, env=env,
                          capture_output=True, text=True)
    names = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return [name for name in names if HEAVY.match(name)]


def commands(scratch: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "apibank_bench"]
    return {
        "import apibank_bench": [sys.executable, "-c", "import apibank_bench"],  # the public API: loaded on use
        "--help": [*cli, "--help"],
        "run --help": [*cli, "run", "--help"],
        "optimize --help": [*cli, "optimize", "--help"],
        "summary --level 1 --limit 100": [*cli, "summary", "--level", "1", "--limit", "100"],
        "tasks": [*cli, "tasks"],
        "data verify": [*cli, "data", "verify"],
        "manifests split": [*cli, "manifests", "split", "--train", "50", "--validation", "50"],
        "score (2 answers)": [*cli, "score", str(scratch / "answers.jsonl"), "--out-dir", str(scratch / "s")],
        "compare (2 folders)": [*cli, "compare", str(scratch / "a"), str(scratch / "b")],
    }


def prepare(scratch: Path, env: dict) -> None:
    ids = json.loads((PROJECT / "manifests" / "apibank_eval_ids.json").read_text(encoding="utf-8"))["ids"][:2]
    (scratch / "answers.jsonl").write_text("".join(json.dumps({"id": i, "prediction": "[GetToday()]"}) + "\n"
                                                   for i in ids), encoding="utf-8")
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-m", "apibank_bench", "score", str(scratch / "answers.jsonl"),
                        "--out-dir", str(scratch / name)], cwd=PROJECT, env=env, check=True, capture_output=True)


def summarize(samples: list[tuple[float, float, float]]) -> dict:
    walls = [wall for wall, _, _ in samples]
    return {"median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "cpu_s": round(statistics.median(cpu for _, cpu, _ in samples), 3),
            "peak_mb": round(max(mb for _, _, mb in samples), 1)}


def pool_once(script: list[str], cwd: Path, env: dict, limit: bool) -> tuple[float, float, float]:
    """The three levels, one process each, in turn: (total wall, total CPU, the largest peak)."""
    total, cpu, peak = 0.0, 0.0, 0.0
    for level, size in POOL.items():
        wall, used, mb = timed([*script, "--level", level, *(["--limit", str(size)] if limit else [])], cwd, env)
        total, cpu, peak = total + wall, cpu + used, max(peak, mb)
    return total, cpu, peak


def compile_sources(*folders: Path) -> None:
    """Byte-compile both sides first, as an installed package is (PYTHONDONTWRITEBYTECODE would else make
    every start compile its modules from source)."""
    for folder in folders:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], check=False, capture_output=True)


#: The reference loads ToolSearcher's model from the Hugging Face Hub; offline (as this machine is) the
#: lookup fails at once instead of retrying with pauses.
REFERENCE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run(repeats: int, reference: Path | None, reference_repeats: int = 1) -> dict:
    compile_sources(PROJECT / "apibank_bench", *([reference] if reference else []))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
    report: dict = {"commands": {}, "pool": {}, "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        prepare(scratch, env)
        for name, argv in commands(scratch).items():
            samples = [timed(argv, PROJECT, env) for _ in range(repeats)]
            report["commands"][name] = {**summarize(samples), "heavy_imports": heavy_imports(argv, env)[:5]}
    ours = [sys.executable, "-m", "apibank_bench", "summary"]
    theirs = [sys.executable, REFERENCE_SCRIPT, "--summary"]
    samples: dict[str, list] = {"ours": [], "reference": []}
    for index in range(repeats):  # alternate, so both see the same machine
        samples["ours"].append(pool_once(ours, PROJECT, env, limit=False))
        if reference is not None and index < reference_repeats:
            samples["reference"].append(pool_once(theirs, reference, {**os.environ, **REFERENCE_ENV,
                                                                      "PYTHONPATH": str(reference)}, limit=True))
    for side, values in samples.items():
        if values:
            report["pool"][side] = summarize(values)
    report["load_after"] = round(os.getloadavg()[0], 2)  # other work on the machine inflates wall time
    if samples["reference"]:
        ours_row, theirs_row = report["pool"]["ours"], report["pool"]["reference"]
        report["pool"]["reference_over_ours"] = round(theirs_row["median_s"] / ours_row["median_s"], 1)
        report["pool"]["reference_cpu_over_ours"] = round(theirs_row["cpu_s"] / ours_row["cpu_s"], 1)
    return report


def print_report(report: dict) -> None:
    print(f"load average (1 min) before {report['load_before']}, after {report['load_after']}; "
          f"{os.cpu_count()} cores\n")
    print("| command | wall s (median) | fastest | CPU s | peak MB | heavy imports |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, row in report["commands"].items():
        print(f"| `{name}` | {row['median_s']:.3f} | {row['min_s']:.3f} | {row['cpu_s']:.3f} | {row['peak_mb']:.0f} | "
              f"{', '.join(row['heavy_imports']) or 'none'} |")
    print("\n| pool gold-replay summary (levels 1, 2, 3: three processes) | wall s (median) | fastest | CPU s "
          "| peak MB |")
    print("| --- | --- | --- | --- | --- |")
    for side in ("ours", "reference"):
        if side in report["pool"]:
            row = report["pool"][side]
            print(f"| {side} | {row['median_s']:.2f} | {row['min_s']:.2f} | {row['cpu_s']:.2f} | {row['peak_mb']:.0f} |")
    if "reference_over_ours" in report["pool"]:
        print(f"\nreference / ours (median wall): {report['pool']['reference_over_ours']}x; "
              f"CPU: {report['pool']['reference_cpu_over_ours']}x")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reference", type=Path, default=None,
                        help="a checkout of juyangbai/MAS-PromptBench to time its --summary beside ours")
    parser.add_argument("--reference-repeats", type=int, default=1, help="passes of the (slow) reference pool")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.repeats, args.reference, args.reference_repeats)
    print(json.dumps(report, indent=1)) if args.json else print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
