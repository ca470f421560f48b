"""`apibank-bench run` and `merge`: the reference's runner interface, as a thin wrapper over the pytest suite."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from .paths import PROJECT_ROOT

BENCH_TESTS = PROJECT_ROOT / "bench_tests"
#: Model options that travel to the model layer as environment variables.
_MODEL_ENV = {"api_key": "OPENAI_API_KEY", "temperature": "APIBANK_TEMPERATURE", "top_p": "APIBANK_TOP_P",
              "max_tokens": "APIBANK_MAX_TOKENS", "timeout": "APIBANK_TIMEOUT",
              "max_retries": "APIBANK_MAX_RETRIES", "max_in_flight": "APIBANK_MAX_IN_FLIGHT",
              "extra_body": "APIBANK_EXTRA_BODY", "server_kind": "APIBANK_SERVER_KIND"}


def add_run_parsers(sub) -> None:
    run = sub.add_parser("run", help="run the benchmark (a thin wrapper over `pytest bench_tests`)")
    run.add_argument("--topology", default="single",
                     choices=["single", "independent", "decentralized", "centralized", "sequential", "agents_sdk"])
    run.add_argument("--level", default="all", help="all (the eval manifest), 1, 2 or 3")
    run.add_argument("--limit", type=int, default=2, help="instances to run (default 2; 0 = all)")
    run.add_argument("--offset", type=int, default=0)
    run.add_argument("--only", nargs="+", metavar="ID")
    run.add_argument("--out-dir", default=None, help="default results/apibank/<topology>")
    run.add_argument("--batch", action="store_true", help="accepted for the reference's interface; changes nothing")
    run.add_argument("--summary", action="store_true", help="no model: the data check and gold replay")
    run.add_argument("--toolsearcher-scorer", choices=["official", "upstream", "keyword"])
    run.add_argument("--team-size", type=int, help="agents per team: 2, 4, 8 or 10 (default 4)")
    run.add_argument("--rounds", type=int, help="debate rounds (decentralized; default 2)")
    run.add_argument("--message-format", choices=["freeform", "semi_structured", "structured_soft"])
    run.add_argument("--resume", action="store_true", help="skip instances already in results.jsonl")
    run.add_argument("--shard", help="i/n: run shard i of n")
    run.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (e.g. 4 or auto)")
    run.add_argument("--prompts-dir", help="folder of role prompts overriding the packaged ones")
    model = run.add_argument_group("model options (default: the embedded local model)")
    model.add_argument("--model", help="model name; 'gold' replays gold calls (harness self-check)")
    model.add_argument("--base-url", nargs="+", help="OpenAI-compatible endpoint(s), round-robin")
    model.add_argument("--seed", type=int)
    model.add_argument("--constrained", action=argparse.BooleanOptionalAction, default=None,
                       help="grammar-constrained decoding (default: on for the embedded model only)")
    model.add_argument("--no-cache", action="store_true", help="turn the response cache off")
    for name in _MODEL_ENV:
        model.add_argument("--" + name.replace("_", "-"), dest=name, help=f"sets ${_MODEL_ENV[name]}")
    run.set_defaults(func=cmd_run)

    merge = sub.add_parser("merge", help="join sharded result folders into one, in manifest order")
    merge.add_argument("dirs", nargs="+")
    merge.add_argument("--out", required=True)
    merge.set_defaults(func=cmd_merge)


def pytest_args(args) -> list[str]:
    """The `pytest bench_tests ...` command line a `run` invocation stands for."""
    argv = [str(BENCH_TESTS), "--apibank-topology", args.topology,
            "--apibank-level", str(args.level)]
    if args.limit:
        argv += ["--apibank-limit", str(args.limit)]
    pairs = {"offset": args.offset or None, "out-dir": args.out_dir, "toolsearcher-scorer": args.toolsearcher_scorer,
             "team-size": args.team_size, "rounds": args.rounds, "message-format": args.message_format,
             "shard": args.shard, "model": args.model, "seed": args.seed, "prompts-dir": args.prompts_dir}
    for key, value in pairs.items():
        if value is not None:
            argv += [f"--apibank-{key}", str(value)]
    if args.only:
        argv += ["--apibank-only", *args.only]
    if args.base_url:
        argv += ["--apibank-base-url", ",".join(args.base_url)]
    if args.constrained is not None:
        argv.append("--apibank-constrained" if args.constrained else "--apibank-no-constrained")
    if args.no_cache:
        argv.append("--apibank-no-cache")
    if args.resume:
        argv.append("--apibank-resume")
    if args.workers:
        argv += ["-n", str(args.workers)]
    return argv


def cmd_run(args) -> int:
    if args.summary:
        from .cli import summary

        print(json.dumps(summary(args.level, args.limit or None, args.offset, args.only), indent=1))
        return 0
    for name, variable in _MODEL_ENV.items():
        if getattr(args, name) is not None:
            os.environ[variable] = str(getattr(args, name))
    import pytest

    code = pytest.main(pytest_args(args))
    # A failing instance is a wrong answer, not a failed run: exit 0 when the suite itself ran.
    return 0 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


def cmd_merge(args) -> int:
    from .manifests import manifest_ids
    from .results import PREDICTIONS, RESULTS, TRACES, RunFiles

    out = Path(args.out)
    files = RunFiles(out)
    level = None
    for directory in map(Path, args.dirs):
        summary_path = directory / "summary.json"
        if level is None and summary_path.is_file():
            level = json.loads(summary_path.read_text()).get("config", {}).get("run", {}).get("level")
        for name in (PREDICTIONS, RESULTS):
            source = directory / name
            if source.is_file():
                with open(out / name, "a", encoding="utf-8") as handle:
                    handle.write(source.read_text(encoding="utf-8"))
        for trace in (directory / TRACES).glob("*.json"):
            shutil.copy2(trace, out / TRACES / trace.name)
    summary = files.finalize(manifest_ids(level or "all"), config={"merged_from": [str(d) for d in args.dirs]})
    print(f"merged {summary['total']} instances into {out}: accuracy {summary['accuracy']:.1%}")
    return 0
