#!/usr/bin/env python
"""How long scoring takes: the gold answers of the pool (445) and eval (100) tasks.

Reports the one-time load (tasks, databases, our API modules; the ToolSearcher
embedding model on its own line, if any gold answer needs it), a first pass that
warms the caches, then the per-task scoring time over several repeats (per task:
the median over repeats; then median and mean over tasks; CPU time from
`time.process_time`, wall time from `time.perf_counter`).

With APIBANK_UPSTREAM pointing at an upstream `api-bank` checkout, upstream's own
way runs in the same process for comparison: its classes loaded once, then per
sample a fresh ToolManager-like setup as upstream's evaluator builds one (every
`init_database/*.json` read from disk, tools built on first use sharing the
sample's databases, CheckToken as token checker), the earlier API calls replayed,
the gold call made and checked. Parameters are converted the reference's way
(`convert_parameters`) on both sides. ToolSearcher gold calls are left out of
that comparison (upstream's ToolSearcher needs the embedding model from the
Hugging Face Hub), so the ratio ours/upstream is over the API-call tasks only.
The reference harness's wrapper (databases read once, deep-copied per tool) is
timed as a third row.

    python benchmarks/bench_scoring.py [--repeats 5] [--json] [--root PATH]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))  # runs from a checkout without installing

from apibank_bench.apis.search import model as embedding  # noqa: E402 - after the checkout joins sys.path

from apibank_bench.data import specs  # noqa: E402
from apibank_bench.core.frozen import thaw  # noqa: E402
from apibank_bench.data.manifests import EVAL_MANIFEST, POOL_MANIFEST, read_manifest  # noqa: E402
from apibank_bench.core.paths import INIT_DATABASE_DIR, require_root  # noqa: E402


class Clock:
    """Wall and CPU seconds of a `with` block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return False

    def ms(self) -> dict:
        return {"wall_ms": self.wall * 1e3, "cpu_ms": self.cpu * 1e3}


# -- the ToolSearcher model load, timed on its own ------------------------------------------

_MODEL_LOADS: list[Clock] = []
_original_load = embedding._load


def _timed_model_load():
    with Clock() as clock:
        model = _original_load()
    _MODEL_LOADS.append(clock)
    return model


embedding._load = _timed_model_load  # get_model() looks `_load` up at call time


# -- upstream's way ------------------------------------------------------------------------

def _upstream_loader():
    path = PROJECT / "tests" / "upstream_apibank.py"
    name = "_apibank_upstream_loader"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name].load_upstream_apis


def read_databases(root: Path) -> dict:
    databases = {}
    for path in sorted((root / INIT_DATABASE_DIR).glob("*.json")):
        with path.open(encoding="utf-8") as handle:
            databases[path.stem] = json.load(handle)
    return databases


def UpstreamSample(classes: dict, root: Path, databases: dict | None = None, copy_per_tool: bool = False):
    """One sample's tools as upstream's ToolManager builds them (or, with `databases` and
    `copy_per_tool`, as the reference harness's wrapper does)."""
    module = sys.modules["_apibank_upstream_loader"]
    return module.UpstreamTools(classes, read_databases(root) if databases is None else databases,
                                copy=copy.deepcopy if copy_per_tool else None)


def ours_environment_score(root: Path, task) -> bool:
    """Our side at the upstream rows' boundary: parameters given (no answer parsing), then
    replay + call + check, as `Scorer.score` does after parsing."""
    from apibank_bench.apis.environment import Environment

    try:
        environment = Environment.for_level(task.level, root)
        environment.replay(task.prior_api_turns)
        result = environment.call(task.gold.api_name, task.gold.params)
        tool = environment.tool(task.gold.api_name)
        return bool(tool.check_api_call_correctness(thaw(result), thaw(task.gold.result)))
    except Exception:
        return False


def upstream_score(classes_by_set: dict, root: Path, task, databases=None, copy_per_tool=False) -> bool:
    classes = classes_by_set[specs.api_set_for_level(task.level)]
    try:
        sample = UpstreamSample(classes, root, databases, copy_per_tool)
        for turn in task.prior_api_turns:
            if turn.api_name != "ToolSearcher":
                sample.call(turn.api_name, turn.params)
        result = sample.call(task.gold.api_name, task.gold.params)
        return bool(sample.tool(task.gold.api_name).check_api_call_correctness(thaw(result), thaw(task.gold.result)))
    except Exception:
        return False


# -- timing --------------------------------------------------------------------------------

def time_tasks(tasks, score, repeats: int) -> dict:
    """Per task: the median wall and CPU time over `repeats` runs; then statistics over tasks."""
    walls = [[] for _ in tasks]
    cpus = [[] for _ in tasks]
    verdicts = [None] * len(tasks)
    passes = []
    for _ in range(repeats):
        with Clock() as whole:
            for index, task in enumerate(tasks):
                wall, cpu = time.perf_counter(), time.process_time()
                verdicts[index] = score(task)
                cpus[index].append(time.process_time() - cpu)
                walls[index].append(time.perf_counter() - wall)
        passes.append((whole.wall, whole.cpu))
    per_wall = [statistics.median(times) * 1e3 for times in walls]
    per_cpu = [statistics.median(times) * 1e3 for times in cpus]
    return {
        "tasks": len(tasks),
        "correct": sum(bool(v) for v in verdicts),
        "verdicts": verdicts,
        "wall_ms_median": statistics.median(per_wall) if tasks else 0.0,
        "wall_ms_mean": statistics.fmean(per_wall) if tasks else 0.0,
        "cpu_ms_median": statistics.median(per_cpu) if tasks else 0.0,
        "cpu_ms_mean": statistics.fmean(per_cpu) if tasks else 0.0,
        "wall_ms_per_pass": statistics.median(wall for wall, _ in passes) * 1e3,
        "cpu_ms_per_pass": statistics.median(cpu for _, cpu in passes) * 1e3,
    }


SCORER_ALL = "ours: Scorer, all tasks"
SCORER_CALLS = "ours: Scorer, API-call tasks"
ENVIRONMENT = "ours: replay+call+check only"
TOOL_MANAGER = "upstream: ToolManager per sample"
WRAPPER = "upstream classes, reference wrapper"


def run(root: Path, repeats: int, upstream: str | None, upstream_repeats: int) -> dict:
    report: dict = {"root": str(root), "repeats": repeats, "upstream_repeats": upstream_repeats, "upstream": upstream or None, "load": {}, "sets": {}}
    load = report["load"]

    with Clock() as clock:
        from apibank_bench.data.tasks import get_task

        sets = {name: [get_task(task_id, root=root) for task_id in read_manifest(manifest)["ids"]]
                for name, manifest in (("pool", POOL_MANIFEST), ("eval", EVAL_MANIFEST))}
    load["tasks"] = clock.ms()
    with Clock() as clock:
        from apibank_bench.apis.environment import initial_databases

        initial_databases(root)
    load["databases"] = clock.ms()
    with Clock() as clock:
        from apibank_bench.apis import api_classes

        for api_set in specs.API_SETS:
            api_classes(api_set)
    load["api_modules"] = clock.ms()

    from apibank_bench.scoring.scorer import Scorer

    scorer = Scorer(root)
    with Clock() as clock:  # warm-up: also builds the frozen ToolSearcher catalogs, loads the model if needed
        for tasks in sets.values():
            for task in tasks:
                scorer.gold_replay(task)
    report["first_pass"] = clock.ms()
    load["toolsearcher_model"] = _MODEL_LOADS[0].ms() if _MODEL_LOADS else None
    report["torch_imported"] = "torch" in sys.modules

    classes_by_set = None
    if upstream:
        with Clock() as clock:
            load_upstream_apis = _upstream_loader()
            classes_by_set = {api_set: load_upstream_apis(upstream, api_set).classes for api_set in specs.API_SETS}
        load["upstream_api_classes"] = clock.ms()
        with Clock() as clock:
            shared = read_databases(root)
        load["upstream_databases_once"] = clock.ms()

    ratio_keys = ("wall_ms_median", "wall_ms_mean", "cpu_ms_median", "cpu_ms_mean", "wall_ms_per_pass", "cpu_ms_per_pass")
    for name, tasks in sets.items():
        calls = [task for task in tasks if task.gold.api_name != "ToolSearcher"]
        rows = {
            SCORER_ALL: time_tasks(tasks, lambda task: scorer.gold_replay(task).correct, repeats),
            SCORER_CALLS: time_tasks(calls, lambda task: scorer.gold_replay(task).correct, repeats),
            ENVIRONMENT: time_tasks(calls, lambda task: ours_environment_score(root, task), repeats),
        }
        if classes_by_set is not None:
            for task in calls:  # warm-up of upstream's side
                upstream_score(classes_by_set, root, task)
            rows[TOOL_MANAGER] = time_tasks(
                calls, lambda task: upstream_score(classes_by_set, root, task), upstream_repeats)
            rows[WRAPPER] = time_tasks(
                calls, lambda task: upstream_score(classes_by_set, root, task, shared, True), repeats)
            for label in (TOOL_MANAGER, WRAPPER):
                row = rows[label]
                row["verdicts_equal_ours"] = sum(a == b for a, b in zip(row["verdicts"], rows[SCORER_CALLS]["verdicts"]))
                for ours in (ENVIRONMENT, SCORER_CALLS):
                    row.setdefault("ratios", {})[ours] = {
                        key: rows[ours][key] / row[key] if row[key] else None for key in ratio_keys}
        for row in rows.values():
            row.pop("verdicts")
        report["sets"][name] = rows
    return report


# -- output --------------------------------------------------------------------------------

def _fmt_ms(item) -> str:
    return "-" if item is None else f"{item['wall_ms']:9.1f} {item['cpu_ms']:9.1f}"


def print_table(report: dict) -> None:
    load = report["load"]
    print(f"data root: {report['root']}")
    print(f"\nOne-time load{'':35s}  wall ms    CPU ms")
    print(f"  {'tasks (3 levels) and pool + eval IDs':45s} {_fmt_ms(load['tasks'])}")
    print(f"  {'initial databases (init_database/*.json)':45s} {_fmt_ms(load['databases'])}")
    print(f"  {'our API modules (both API sets)':45s} {_fmt_ms(load['api_modules'])}")
    model = load["toolsearcher_model"]
    print(f"  {'ToolSearcher embedding model':45s} "
          + (_fmt_ms(model) if model else "not loaded: no gold answer needs an embedding"))
    if "upstream_api_classes" in load:
        print(f"  {'upstream API classes (both sets)':45s} {_fmt_ms(load['upstream_api_classes'])}")
        print(f"  {'upstream databases, read once (wrapper row)':45s} {_fmt_ms(load['upstream_databases_once'])}")
    print(f"  {'first pass over pool + eval (warm-up)':45s} {_fmt_ms(report['first_pass'])}")
    print(f"  torch imported: {report['torch_imported']}")

    print(f"\nPer-task scoring after warm-up ({report['repeats']} repeats, ToolManager row "
          f"{report['upstream_repeats']}; per task the median over repeats; times in ms)")
    header = (f"  {'set':4s} {'scorer':36s} {'tasks':>5s} {'correct':>9s} {'wall med':>9s} {'wall mean':>9s} "
              f"{'CPU med':>9s} {'CPU mean':>9s} {'wall/pass':>9s} {'CPU/pass':>9s}")
    print(header)
    print("  " + "-" * (len(header) - 2))
    for name, rows in report["sets"].items():
        for label, row in rows.items():
            correct = f"{row['correct']}" + (f" ={row['verdicts_equal_ours']}" if "verdicts_equal_ours" in row else "")
            print(f"  {name:4s} {label:36s} {row['tasks']:5d} {correct:>9s} {row['wall_ms_median']:9.3f} "
                  f"{row['wall_ms_mean']:9.3f} {row['cpu_ms_median']:9.3f} {row['cpu_ms_mean']:9.3f} "
                  f"{row['wall_ms_per_pass']:9.1f} {row['cpu_ms_per_pass']:9.1f}")
            for ours, ratio in row.get("ratios", {}).items():
                short = "replay+call+check" if ours == ENVIRONMENT else "Scorer"
                print(f"  {'':4s} {'  ratio: ours ' + short + ' / this':36s} {'':5s} {'':9s} "
                      + " ".join(f"{ratio[key]:9.3f}" for key in ("wall_ms_median", "wall_ms_mean", "cpu_ms_median",
                                                                   "cpu_ms_mean", "wall_ms_per_pass", "cpu_ms_per_pass")))
        print()
    if report["upstream"]:
        print("  '=N': upstream verdicts equal to ours. Ratios < 1: ours is faster. 'Scorer' includes parsing the")
        print("  answer text; 'replay+call+check' starts from the parameters, as the upstream rows do.")
    else:
        print("  Set APIBANK_UPSTREAM (or --upstream) to an upstream api-bank checkout to time upstream's way too.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed passes after the warm-up (default 5)")
    parser.add_argument("--root", default=None, help="API-Bank data root (default $APIBANK_ROOT or vendor/api-bank)")
    parser.add_argument("--upstream", default=os.environ.get("APIBANK_UPSTREAM") or None,
                        help="upstream api-bank checkout (default $APIBANK_UPSTREAM)")
    parser.add_argument("--upstream-repeats", type=int, default=3,
                        help="timed passes of the (slow) ToolManager-per-sample row (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    from apibank_bench.core.settings import value_of

    report = run(require_root(value_of(args, "root")), max(1, args.repeats), args.upstream, max(1, args.upstream_repeats))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
