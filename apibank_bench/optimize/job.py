"""One optimize job in DIR: the phases, each skipped on --resume when its output exists.

  optimize    the method searches role prompts on the train/validation splits -> prompts/
  validation  seed vs best on the validation split                               -> validation.json
  final       seed and best on the eval manifest (first --eval-limit)            -> final/, final.json

Nothing before `final` sees an eval instance: the splits exclude the eval IDs and
Context.evaluate refuses them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from apibank_bench.agents.models import describe_model, model_client, needs_local_server
from apibank_bench.llm.probe import endpoint_models
from apibank_bench.data.manifests import manifest_ids, splits
from apibank_bench.runs.provenance import provenance
from apibank_bench.runs.benchmark_run import BenchmarkRun
from apibank_bench.runs.instances import InstanceResult
from apibank_bench.runs.parts import RunParts
from apibank_bench.scoring.stage import Stage
from apibank_bench.core.settings import BY_NAME, RunConfig, run_config_of
from apibank_bench.optimize import grid, methods
from apibank_bench.optimize.context import Context, usage, write_prompts
from apibank_bench.optimize.events import EventLog, dump
from apibank_bench.optimize.final import compare_folders
from apibank_bench.optimize.roles import roles, seed_prompts

#: What --resume must find unchanged (the endpoint URLs and the cache may differ).
_IDENTITY = ("cell", "method", "roles", "splits", "final_ids")
_RUN_IDENTITY = ("topology", "team_size", "rounds", "message_format", "model", "seed", "constrained", "model_role")


class JobError(Exception):
    """A job that cannot start (reported as one line)."""


def _versions() -> dict:
    found = {}
    for name in ("gepa", "dspy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def run(args: argparse.Namespace, module: ModuleType, cell: grid.Cell) -> int:
    hyper = methods.hyperparameters(args, args.method, module)
    budget = args.budget if args.budget is not None else methods.default_budget(module)
    try:  # every run setting `optimize` takes, the cell's model name; its models checked as they resolve (a --model
        # without --base-url that names no embedded model, a --model-role for a role the topology does not have, a
        # local:PATH that is missing: agents.models.check_models)
        cfg = run_config_of(args, model=cell.model)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    out = Path(args.out)
    if (out / "config.json").exists() and not args.resume:
        raise JobError(f"{out} already holds an optimize run: pass --resume to continue it, or another --out")
    eval_ids = manifest_ids("all")
    split = splits(args.train, args.validation, args.seed)
    config = {
        "arguments": {key: value for key, value in vars(args).items() if key != "func"},
        "cell": dataclasses.asdict(cell),
        "off_grid": grid.off_grid_reason(cell),
        "method": {"name": args.method, "budget": budget, "hyperparameters": hyper},
        "run": cfg.to_dict(),
        "roles": roles(cfg),
        "splits": {"seed": args.seed, **split},
        "excluded_eval_ids": eval_ids,
        "final_ids": eval_ids[: args.eval_limit],
        **provenance(cfg),
        "optimizer_packages": _versions(),
    }
    if (out / "config.json").exists():
        changed = _changed(json.loads((out / "config.json").read_text(encoding="utf-8")), config)
        if changed:
            raise JobError(f"--resume with another job than the one in {out}: {', '.join(changed)} differ")
    # The job's parts: its clients, scorer and embedded model, shared by the rollouts and the final runs.
    parts = RunParts(cfg, instance_ids=lambda: eval_ids, announce=lambda title: print(
        f"optimize: starting the embedded local model ({title})", file=sys.stderr))
    try:
        return _run(args, module, hyper, budget, config, split, eval_ids, out, parts)
    finally:
        parts.close()


def _changed(before: dict, now: dict) -> list[str]:
    """The parts of a job's identity that differ between its config.json and these arguments."""
    def plain(value):  # as config.json holds it (tuples become lists)
        return json.loads(json.dumps(value, default=str))

    changed = [key for key in _IDENTITY if plain(before.get(key)) != plain(now[key])]
    # A setting a job recorded before it existed had its default then (`--model-role`: none).
    return changed + [f"run.{key}" for key in _RUN_IDENTITY
                      if before.get("run", {}).get(key, BY_NAME[key].default) != now["run"][key]]


def _optimizer_client(args, cfg: RunConfig, client, local):
    """The reflection/proposal/judge client: the task client unless another model or endpoint is named."""
    if not args.optimizer_model and not args.optimizer_base_url:
        return client, None
    aliases = grid.model_aliases(args.model_aliases)
    model = aliases.get(args.optimizer_model, args.optimizer_model) or cfg.model
    # The optimizer is one model, not a team: the task's role models are not its.
    ocfg = dataclasses.replace(cfg, model=model, base_url=list(args.optimizer_base_url or cfg.base_url), model_role=[])
    if args.optimizer_model and needs_local_server(ocfg):
        raise JobError(f"--optimizer-model {args.optimizer_model} needs an endpoint: pass --optimizer-base-url")
    return model_client(ocfg, local), describe_model(ocfg, endpoint_models(ocfg.base_url[0]))


def _run(args, module, hyper, budget, config, split, eval_ids, out: Path, parts: RunParts) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cfg = parts.cfg
    events = EventLog(out / "log.jsonl")
    if args.resume:
        events.log("resume")
    client = parts.models()
    if client is None:
        raise JobError("optimize needs a model to prompt: --model gold has none")
    optimizer, described = _optimizer_client(args, cfg, client, parts.url)
    config["optimizer_model"] = described or config["model"]
    if not (out / "config.json").exists():
        dump(out / "config.json", config)
    seeds = seed_prompts(cfg)
    write_prompts(out / "seed_prompts", cfg.topology, seeds)
    ctx = Context(topology=cfg.topology, roles=roles(cfg), seed_prompts=seeds, train_ids=split["train"],
                  validation_ids=split["validation"], seed=args.seed, budget=budget, hyper=hyper, out_dir=out,
                  parts=parts, events=events, optimizer=optimizer,
                  protected_ids=eval_ids, workers=args.concurrency)

    best = _phase_optimize(ctx, args.method, module, out, events)
    _phase_validation(ctx, seeds, best, out, events)
    final_ids = eval_ids[: args.eval_limit]
    for name, folder in (("seed", out / "seed_prompts"), ("optimized", out / "prompts")):
        _final_run(name, folder, final_ids, parts, out, args.resume, events, args.concurrency)
    final = compare_folders(out / "final" / "seed", out / "final" / "optimized")
    dump(out / "final.json", final)
    events.log("done", phase="final", seed=final["seed"]["accuracy"], optimized=final["optimized"]["accuracy"],
               p_value=final["paired_test"]["p_value"], client=client.stats.snapshot())
    events.close()
    print(f"optimize: eval {final['instances']} instances: seed {final['seed']['accuracy']:.1%} -> optimized "
          f"{final['optimized']['accuracy']:.1%} (improved {len(final['improved'])}, regressed "
          f"{len(final['regressed'])}, exact McNemar p = {final['paired_test']['p_value']:.3g}); {out}")
    return 0


def _phase_optimize(ctx: Context, method: str, module: ModuleType, out: Path, events: EventLog) -> dict[str, str]:
    """The method's best role prompts -> out/prompts (written aside and renamed: all or nothing)."""
    target = out / "prompts"
    if (target / ctx.topology).is_dir():
        events.log("skip", phase="optimize", reason="prompts/ exists")
        return {role: (target / ctx.topology / f"{role}.txt").read_text(encoding="utf-8").strip()
                for role in ctx.roles}
    events.phase = "optimize"
    events.log("start", method=method, budget=ctx.budget, roles=ctx.roles,
               train=len(ctx.train_ids), validation=len(ctx.validation_ids))
    best = {**ctx.seed_prompts, **module.optimize(ctx)}
    staging = out / "prompts.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    write_prompts(staging, ctx.topology, best)
    staging.rename(target)
    events.log("best", prompt_chars={role: len(text) for role, text in best.items()})
    return {role: text.strip() for role, text in best.items()}


def _phase_validation(ctx: Context, seeds: dict, best: dict, out: Path, events: EventLog) -> None:
    if (out / "validation.json").exists():
        events.log("skip", phase="validation", reason="validation.json exists")
        return
    events.phase = "validation"
    report: dict[str, Any] = {"ids": ctx.validation_ids}
    for name, prompts in (("seed", seeds), ("optimized", best)):
        rollouts = ctx.evaluate(prompts, ctx.validation_ids) if ctx.validation_ids else []
        correct = sum(r.correct for r in rollouts)
        report[name] = {"correct": correct, "total": len(rollouts),
                        "accuracy": correct / len(rollouts) if rollouts else None,
                        "errors": sum(r.stage == Stage.ERROR for r in rollouts),
                        "correct_ids": [r.task_id for r in rollouts if r.correct]}
    dump(out / "validation.json", report)


def _final_run(name: str, prompts_dir: Path, ids: list[str], parts: RunParts, out: Path, resume: bool,
               events: EventLog, workers: int) -> None:
    """An ordinary results folder (as `run --prompts-dir` writes it) on the first eval instances, written by
    the benchmark's own run (runs.benchmark_run), with the job's parts shared (its clients, scorer, embedded model)."""
    folder = out / "final" / name
    if resume and (folder / "summary.json").exists():
        events.log("skip", phase="final", candidate=name, reason="summary.json exists")
        return
    events.phase = "final"
    run_cfg = dataclasses.replace(parts.cfg, prompts_dir=str(prompts_dir), level="all", limit=len(ids), offset=0, only=[], epochs=1, shard=None,
                                  out_dir=str(folder), resume=resume, overwrite=not resume, concurrency=workers)
    run = BenchmarkRun(run_cfg, parts=parts.sharing_with(run_cfg))
    run.open_folder()
    if run.cases() != ids:
        raise JobError(f"the final run selects {len(run.cases())} instances, not the first {len(ids)} eval ones")
    count = len(ids) - len(run.selection.to_run)

    def record(outcome: InstanceResult) -> None:
        nonlocal count
        count += 1
        events.log("final_instance", step=count, candidate=name, id=outcome.row.id, correct=outcome.row.correct,
                   **usage([outcome]))

    summary = run.solve(on_result=record)
    events.log("final", candidate=name, accuracy=summary["accuracy"], correct=summary["correct"],
               total=summary["total"])
