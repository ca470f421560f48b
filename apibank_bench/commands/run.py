"""`apibank-bench run` and `merge`: the reference's runner interface, as a thin wrapper over the pytest suite.

`run` exits with a `core.exit_codes.ExitCode`; its help lists them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from apibank_bench.core import settings
from apibank_bench.core.exit_codes import (PYTEST_FAILED, PYTEST_INTERRUPTED, PYTEST_NO_TESTS, PYTEST_OK,
                                          PYTEST_USAGE_ERROR, ExitCode, described)
from apibank_bench.bench import BENCH_MODULE

if TYPE_CHECKING:
    from apibank_bench.runs.parts import RunParts

#: Plugins whose output says nothing about a benchmark run (pytest users keep them); langsmith's (pulled in
#: by langgraph) costs about 10 s a start.
QUIET_PLUGINS = ("anyio", "benchmark", "hypothesispytest", "langsmith_plugin")


def register(sub) -> None:
    run = sub.add_parser("run", help="run the benchmark (a thin wrapper over `pytest --pyargs apibank_bench.bench`)",
                         description=described("run"),
                         epilog="Anything after `--` goes to pytest as is, e.g. `-- --tb=short -x`.")
    run.add_argument("--summary", action="store_true", help="no model: the data check and gold replay")
    run.add_argument("--batch", action="store_true", help="accepted for the reference's interface; changes nothing")
    run.add_argument("-q", "--quiet", action="count", default=0, help="less of pytest's own output (as pytest -q)")
    run.add_argument("-v", "--verbose", action="count", default=0, help="one line per instance (as pytest -v)")
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="passed to pytest as is")
    settings.add_command_flags(run, "run")
    run.set_defaults(func=run_benchmark)

    merge = sub.add_parser("merge", help="join sharded result folders into one, in manifest order")
    merge.add_argument("dirs", nargs="+")
    merge.add_argument("--out", required=True)
    merge.set_defaults(func=run_merge)


def run_settings(args) -> settings.RunConfig:
    """The run's settings, resolved once: flags, else environment, else defaults (no --limit: 2 instances,
    unless `--only` names the instances: a named selection runs every one it names)."""
    named = args.limit is None and settings.value_of(args, "only")  # (a resumed folder's `--only` comes with its limit)
    return settings.run_config_of(args, limit=None if named else settings.run_limit(args.limit))


def pytest_args(args) -> list[str]:
    """The `pytest --pyargs apibank_bench.bench ...` command line a `run` invocation stands for (its settings
    travel as `plugin.options.GivenSettings`, not as options): the package's own module, from any working directory."""
    argv = ["--pyargs", BENCH_MODULE]
    workers = settings.value_of(args, "workers")
    if workers:
        argv += ["-n", str(workers)]
    argv += ["-q"] * getattr(args, "quiet", 0) + ["-v"] * getattr(args, "verbose", 0)
    passed = list(getattr(args, "pytest_args", None) or [])
    for plugin in QUIET_PLUGINS:  # hypothesis's plugin alone imports all of hypothesis for its closing summary
        argv += ["-p", f"no:{plugin}"]
    # pytest's log capture sets up and takes down handlers on the root logger around each test phase, for
    # sections `run` never shows; with a team's threads running that costs about 0.3 s of a 100-instance
    # run (benchmarks/bench_throughput.py). A run given pytest's own log options keeps it.
    if not any(arg.startswith("--log") or arg.startswith("log_") or arg == "--show-capture" for arg in passed):
        argv += ["-p", "no:logging"]
    # No `[ 45%]` column (the progress line counts), and no warning that modules imported before
    # pytest started (this command's own) cannot have their asserts rewritten.
    argv += ["-o", "console_output_style=classic", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    return argv + passed


def check_before_start(cfg) -> None:
    """What `run` can refuse before pytest starts, in the words of `run`'s flags (beyond the settings' own
    checks, which the models named meet as they resolve: agents.models.check_models)."""
    from apibank_bench.runs.cost import price_table
    from apibank_bench.data.manifests import select

    select(cfg.level, None, cfg.offset, cfg.only or None)  # an unknown --only ID: where the valid ones are
    price_table(cfg.price, cfg.price_file)  # a price file without its date, or unreadable


def run_benchmark(args) -> int:
    cfg = run_settings(args)  # a bad value is one clear line (exit 2) before anything runs
    if args.summary:
        from apibank_bench.scoring.curation import gold_replay_report

        report = gold_replay_report(cfg.level, cfg.limit, cfg.offset, cfg.only or None, cfg.root)
        print(json.dumps(report, indent=1))
        return ExitCode.OK
    check_before_start(cfg)
    import pytest

    from apibank_bench.agents import import_solver_modules

    warmed = warm_scoring(cfg, workers=bool(settings.value_of(args, "workers")))
    import_solver_modules(cfg)  # before pytest: see why there

    from apibank_bench.plugin.command_output import RunOutput
    from apibank_bench.plugin.options import GivenSettings

    outcome = RunOutput()
    given = GivenSettings(cfg, frozenset(settings.given_names(lambda s: getattr(args, s.name, None))),
                          scorer=warmed.scorer() if warmed is not None else None)
    try:
        code = pytest.main(pytest_args(args), plugins=[outcome, given])
    finally:
        if warmed is not None:
            warmed.close()
    return exit_code(code, outcome)


def warm_scoring(cfg: settings.RunConfig, workers: bool) -> "RunParts | None":
    """For a model's run scored in this process: the run's parts (runs.parts.RunParts), their scorer loading, in the
    background, what scoring the selection may need (the embedding model and the catalogs a ToolSearcher scorer
    searches) while LangGraph is imported; the session scores with that scorer (plugin.options.GivenSettings) and
    finds it loaded: started there, after pytest's start, a 100-instance run's first results waited for it and
    were written after its last answer (benchmarks/bench_throughput.py). None: nothing to warm (gold; xdist
    workers score in their own processes)."""
    if cfg.is_gold or workers:
        return None
    from apibank_bench.apis.search.model import use_cache_root
    from apibank_bench.data.manifests import select
    from apibank_bench.runs.parts import RunParts

    use_cache_root(cfg.cache_root)  # (the session sets the same)
    parts = RunParts(cfg, instance_ids=lambda: select(cfg.level, cfg.limit, cfg.offset, cfg.only or None))
    parts.warm_scoring()
    return parts


def exit_code(code: int, outcome) -> ExitCode:
    """`run`'s exit code for its pytest session's status (already the table's: `of_pytest_session`) and what the
    run's plugins saw (`RunOutput`): a wrong answer is a result, and a usage error is 2, as for every command."""
    if code in (ExitCode.INTERRUPTED, PYTEST_INTERRUPTED):
        return ExitCode.INCOMPLETE if outcome.stopped else ExitCode.INTERRUPTED
    if code in (PYTEST_USAGE_ERROR, PYTEST_NO_TESTS):
        return ExitCode.USAGE
    if code == ExitCode.WORSE or outcome.regression:
        return ExitCode.WORSE
    if code not in (PYTEST_OK, PYTEST_FAILED):
        # the plugin's ExitCode.UNREACHABLE, or pytest's INTERNAL_ERROR (3, the same number)
        return ExitCode.UNREACHABLE
    summary = outcome.summary or {}
    return ExitCode.INCOMPLETE if summary.get("errors") or summary.get("not_run") else ExitCode.OK


def run_merge(args) -> int:
    """Exit 0: the merged folder is the whole run; 1: a shard is missing (its cases are `not_run`); 2: refused."""
    import sys

    from apibank_bench.runs.closing_table import cases_words
    from apibank_bench.runs.merge import MergeRefused, merge

    try:
        summary = merge([Path(d) for d in args.dirs], Path(args.out))
    except MergeRefused as exc:
        print(f"apibank-bench merge: refused: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(merged_line(len(args.dirs), args.out, summary))
    if not summary["complete"]:
        words = cases_words(summary)
        print(f"INCOMPLETE: {summary['errors']} {words[1]} errored and {summary['not_run']} not in any of the folders "
              f"(a shard missing?); {settings.flag('resume')} --out-dir {args.out} finishes the run")
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def merged_line(folders: int, out, summary: dict) -> str:
    """`merged 2 folders into OUT: 20 of the run's 20 selected cases (...) have a row, accuracy 55.0% over
    the 20 attempts` (with one epoch: instances)."""
    from apibank_bench.runs.closing_table import epochs_of, selected_text

    rows = summary.get("attempts", summary["total"])
    over = f"the {rows} attempts" if epochs_of(summary) > 1 else f"the {rows} instances"
    return (f"merged {folders} folders into {out}: {rows} of the run's {selected_text(summary)} have a row, "
            f"accuracy {summary['accuracy']:.1%} over {over}")
