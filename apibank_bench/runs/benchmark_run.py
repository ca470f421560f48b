"""One benchmark run, headless: its settings, its selection, its folder and the rows written to it (its
tally), the parts that solve its instances (runs.parts: the model clients, scorer, solver, pool, the embedded
model), and its outcome (summary, the gate's verdict).

A script runs the benchmark without pytest (a composition root like the CLI: it first hands core's
settings the choices and rules the layers own, so it can resolve its settings):

    hand_down()              # runs.setting_rules
    cfg = settings.from_environment(model="gold", limit=10)
    run = BenchmarkRun(cfg)
    run.open_folder()        # one run per folder (runs.folder): refused before anything runs
    summary = run.solve()    # every case of the selection, `instances_in_flight` at a time

Under pytest the plugin (`plugin.bench_session`) holds one `BenchmarkRun` and feeds it the rows its
tests produce, in this process or, under xdist, in the workers. Only one process writes the folder;
a fresh run empties it when its first row is written, so a run that fails before any instance leaves
the earlier results alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

from apibank_bench.core import settings
from apibank_bench.core.interrupt import deferred
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import run_cases, split_case
from apibank_bench.runs.folder import decide, other_selection, write_record
from apibank_bench.runs.instances import InstancePool, InstanceResult, RunStopped
from apibank_bench.runs.naming import results_dir
from apibank_bench.runs.parts import RunParts
from apibank_bench.runs.provenance import now
from apibank_bench.runs.results import (PREDICTIONS, RESULTS, RunFiles, finished_keys, read_rows, read_summary,
                                        unreadable_lines)
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.versions import UnsupportedSchemaVersion

OVERFLOW = "ContextLengthError"  #: in the error of a row whose prompt did not fit the server's context (llm.http)


class EmptySelection(ValueError):
    """The settings select no instance."""


@dataclass
class Selection:
    """What the run runs: the selection's cases less what a resumed run finished, and what pytest collected."""

    narrowing: dict = field(default_factory=dict)  #: pytest options that run part of the selection (`-k`, `--lf`...)
    cases: list[str] | None = None  #: the selection's cases in run order, before resume (`BenchmarkRun.cases`)
    to_run: list[str] = field(default_factory=list)  #: the selection less what a resumed run finished
    collected: set[str] | None = None  #: the cases pytest collected of it (after -k, --lf...)
    total: int = 0  #: cases this run will run
    keep: bool = False  #: keep the folder's lines (resume, or a narrowed rerun)
    forced: list[str] = field(default_factory=list)  #: measured settings that differ from the folder's run (--force)
    other: list[str] = field(default_factory=list)  #: how the selection of the folder's run differs, when narrowed into it


@dataclass
class Tally:
    """What the run's written rows and its processes counted."""

    seen: set[tuple[str, int]] = field(default_factory=set)  #: (instance, epoch) keys written
    done: int = 0
    correct: int = 0
    errors: int = 0
    cache_hits: int = 0
    answers: int = 0  #: the model's answers
    cut_answers: int = 0  #: those that stopped at max_tokens
    cut_texts: list[str] = field(default_factory=list)  #: the first few of those (which fix applies: runs.cut_answers)
    error_reasons: dict[str, str] = field(default_factory=dict)  #: an error row's reason code -> its first message
    worker_counts: list[dict] = field(default_factory=list)  #: each finished xdist worker's requests per endpoint
    worker_closed: list[dict] = field(default_factory=list)  #: each finished xdist worker's closed connections

    def count(self, row: ResultRow, trace: dict | None) -> None:
        self.done += 1
        self.correct += row.is_correct
        if row.is_error:
            self.errors += 1
            self.error_reasons.setdefault(str(row.reason), str(row.error or "?")[:160])
        turns = (trace or {}).get("agents") or ()
        self.cache_hits += sum(bool(turn.get("cached")) for turn in turns)
        reasons = [turn["finish_reason"] for turn in turns if turn.get("finish_reason")]
        self.answers += len(reasons)
        self.cut_answers += reasons.count("length")
        self.cut_texts += [str(turn.get("answer") or "") for turn in turns
                           if turn.get("finish_reason") == "length"][:CUT_TEXTS_KEPT - len(self.cut_texts)]


@dataclass
class Outcome:
    """What the run concluded."""

    stopped: str | None = None  #: why the run stopped early (the breaker, -x)
    summary: dict | None = None  #: summary.json, once written
    verdict: Any = None  #: the regression gate's (reports.gate.Verdict), when given a baseline


class BenchmarkRun:
    """One run: its settings, what it selects (`selection`), what it has written (`tally`), what solves its
    instances (`parts`) and what it concluded (`outcome`). Upper layers read these parts; the run's own methods
    write them."""

    def __init__(self, cfg: Any, narrowing: dict | None = None, parts: RunParts | None = None) -> None:
        self.cfg = cfg  #: the resolved settings (core.settings.RunConfig)
        self.started = time.time()
        self.started_at = now()
        self.running_since = self.started  #: when instances began (the rate leaves start-up out)
        self.selection = Selection(narrowing or {})
        self.tally = Tally()
        self.parts = parts or RunParts(cfg, instance_ids=self.instance_ids)
        self.outcome = Outcome()
        self.pool: InstancePool | None = None  #: this process's instances in flight
        self._files: RunFiles | None = None
        self._record: dict = {}  #: run.json

    @property
    def out_dir(self) -> Path:
        """The run's results folder (`--out-dir`, else named from the settings: runs.naming)."""
        return Path(results_dir(self.cfg))

    # -- the selection ---------------------------------------------------------------------

    def cases(self) -> list[str]:
        """The selection's cases (runs.epochs: one per instance and epoch, a shard's share) in run order,
        before resume. A bad selection is a ValueError (FileNotFoundError for a missing manifest)."""
        if self.selection.cases is None:
            cfg = self.cfg
            ids = select(cfg.level, cfg.limit, cfg.offset, cfg.only or None)
            self.selection.cases = run_cases(ids, cfg.epochs, cfg.shard)
        return self.selection.cases

    def instance_ids(self) -> list[str]:
        """The instances of this run's cases, in manifest order."""
        return list(dict.fromkeys(split_case(case)[0] for case in self.cases()))

    def cases_to_run(self) -> list[str]:
        """The selection's cases, less what a resumed run already finished (errored cases run again)."""
        if not self.instance_ids():
            given = ", ".join(settings.flag(name) for name in ("level", "limit", "offset", "only", "shard"))
            raise EmptySelection(f"the selection is empty (check {given})")
        cases = self.cases()
        if self.cfg.resume and not self.cfg.overwrite:
            done = finished_keys(self.out_dir)
            cases = [case for case in cases if split_case(case) not in done]
        return cases

    def passed_keys(self) -> set[tuple[str, int]]:
        """`--lf`: the (instance, epoch) keys of the folder with a correct row; the others failed last."""
        return {row.key for row in read_rows(self.out_dir) if row.correct}

    def deselected(self) -> list[str]:
        """Cases of the selection that pytest did not collect (`-k`, `--deselect`, `--lf`, test IDs)."""
        chosen = self.selection
        if chosen.collected is None:
            return []
        return [case for case in chosen.to_run if case not in chosen.collected]

    def collect(self, cases: list[str]) -> None:
        """What pytest runs of the selection (the first collection seen counts)."""
        if self.selection.collected is None:
            self.selection.collected = set(cases)
            self.selection.total = len(self.selection.collected)

    def start_running(self) -> None:
        """Instances begin now (the rate leaves start-up out)."""
        self.running_since = time.time()

    # -- the folder ------------------------------------------------------------------------

    def open_folder(self) -> None:
        """Decide, before anything runs, whether this run may write its folder (runs.folder.decide raises
        FolderTaken), and what it runs."""
        chosen = self.selection
        decision = decide(self.out_dir, self.cfg, narrowed=bool(chosen.narrowing))
        chosen.keep, chosen.forced = decision.keep, decision.forced
        if chosen.keep and chosen.narrowing:  # `-k` into another selection's folder: its rows join theirs (said)
            chosen.other = other_selection(self.out_dir, self.cfg)
        chosen.to_run = self.cases_to_run()
        chosen.total = len(chosen.to_run)

    def unreadable(self) -> list[str]:
        """Lines of a kept folder that cannot be read (`results.jsonl line 7`): set aside when this run writes."""
        if not self.selection.keep:
            return []
        return [f"{name} line {number}" for name in (RESULTS, PREDICTIONS)
                for number in unreadable_lines(self.out_dir / name)]

    # -- rows --------------------------------------------------------------------------------

    def add(self, payload: dict) -> ResultRow | None:
        """Write one instance's lines (`InstanceResult.payload`, as they travel); None if its case has a row."""
        row = ResultRow.from_json(payload["result"])
        if row.key in self.tally.seen:
            return None
        self.tally.seen.add(row.key)
        files = self._open_files()
        with deferred():  # an interrupt now would leave a row without its trace
            files.append(payload["prediction"], row, payload.get("trace"))
        self.tally.count(row, payload.get("trace"))
        return row

    def _open_files(self) -> RunFiles:
        """The folder's files, opened (and run.json written) with the first row this run writes."""
        if self._files is None:
            self._files = RunFiles(self.out_dir, resume=self.selection.keep)
            self._record = write_record(self._files.out_dir, self.cfg, self.started_at, self.selection.forced)
        return self._files

    def add_result(self, result: InstanceResult) -> ResultRow | None:
        return self.add(result.payload)

    def warnings(self, row: ResultRow | None = None) -> list[tuple[str, str]]:
        """What the user can fix, as (kind, line): a prompt longer than the server's context, and answers
        that keep stopping at max_tokens (`row` None: the run's end, when fewer answers suffice)."""
        found = []
        if row is not None and row.is_error and OVERFLOW in str(row.error):
            found.append(("overflow", f"apibank: warning: {row.error}"))
        tally = self.tally
        if tally.cut_answers > CUT_SHARE * tally.answers and (tally.answers >= CUT_MIN_ANSWERS or row is None):
            fix, what = self.cut_fix()
            found.append(("cut", f"apibank: warning: {tally.cut_answers} of {tally.answers} model answers stopped at "
                          f"max_tokens ({self.cfg.max_tokens}), and answers cut off seldom hold a call; the fix is "
                          f"the {fix}: {what}; summary.json counts them (answers_at_max_tokens)"))
        return found

    def cut_fix(self) -> tuple[str, str]:
        """Which fix applies to answers that stop at max_tokens (runs.cut_answers), for `--model` at its endpoint."""
        from apibank_bench.llm.probe import endpoint_models
        from apibank_bench.runs.cut_answers import cut_fix

        models = endpoint_models(self.cfg.base_url[0]) if self.cfg.base_url else None
        return cut_fix(self.cfg, models, self.tally.cut_texts)

    # -- solving, headless -----------------------------------------------------------------------

    def start_pool(self, cases: list[str], load: Callable | None = None) -> InstancePool:
        """This process's instance pool over the run's parts, its first cases queued; a tripped breaker stops it."""
        cfg = self.cfg
        self.pool = self.parts.pool(load, time_limit=cfg.instance_timeout or None)
        models = self.parts.built_models
        if models is not None:
            models.breaker.on_trip(self.pool.stop)
        self.pool.start(cases)
        return self.pool

    def solve(self, on_result: Callable[[InstanceResult], None] | None = None) -> dict:
        """Solve, score and write every case left to run, in order, with the run's parts (`parts`: built from
        the settings, the embedded model started if the run asks it and stopped at the end); returns the
        summary."""
        chosen = self.selection
        if not chosen.to_run and self._files is None and not self.tally.seen:
            self.open_folder()
        try:
            self.parts.models()  # built before the pool (its breaker stops the pool)
            pool = self.start_pool(chosen.to_run)
            self.start_running()
            try:
                for case in chosen.to_run:
                    try:
                        result = pool.result(case)
                    except RunStopped as exc:
                        self.stopped_by(str(exc))
                        break
                    self.add_result(result)
                    if on_result is not None:
                        on_result(result)
            finally:
                pool.close()
        finally:
            self.parts.close()
        self.hold_rows()
        return self.finish()

    def stopped_by(self, reason: str | None) -> None:
        """The run stopped early, and why (the breaker, -x); the first reason counts."""
        if self.outcome.stopped is None:
            self.outcome.stopped = reason

    def judged(self, verdict: Any) -> None:
        """The regression gate's verdict on this run (reports.gate)."""
        self.outcome.verdict = verdict

    def add_worker(self, counts: dict | None, closed: dict | None) -> None:
        """A finished xdist worker's requests per endpoint and closed connections."""
        if counts:
            self.tally.worker_counts.append(counts)
        if closed:
            self.tally.worker_closed.append(closed)

    def hold_rows(self) -> None:
        """A resumed run with nothing left to run (finished, or killed before its summary) summarizes the
        folder's rows: its summary and closing table are the folder's."""
        if self.selection.keep and not self.selection.to_run and (self.out_dir / RESULTS).exists():
            self._open_files()

    # -- the end ---------------------------------------------------------------------------------

    def endpoint_counts(self) -> dict:
        """The run's requests per endpoint: this process's and its workers' (URL credentials masked)."""
        from apibank_bench.core.redact import redact
        from apibank_bench.llm.router import merge_snapshots

        own = {}
        model = self.parts.built_models
        if model is not None:
            counts = model.endpoint_counts() if hasattr(model, "endpoint_counts") else model.endpoint_report()
            own = {redact(url): part for url, part in counts.items()}
        return merge_snapshots([own, *self.tally.worker_counts])

    def own_closed(self) -> dict:
        """The connections the server closed on this process's requests, and the in-flight limit that held."""
        model = self.parts.built_models
        if model is None:
            return {}
        return {"count": model.closed.count, "most_in_flight": model.closed.most_in_flight,
                "in_flight_limit": model.in_flight_limit()}

    def closed_connections(self) -> dict:
        """Closed connections summed over the run's processes (so are their in-flight limits), and the most
        in flight at a close in any one of them."""
        parts = [part for part in (self.own_closed(), *self.tally.worker_closed) if part]
        if not parts:
            return {}
        return {"count": sum(part["count"] for part in parts),
                "most_in_flight": max(part["most_in_flight"] for part in parts),
                "in_flight_limit": sum(part["in_flight_limit"] for part in parts)}

    def finish(self) -> dict:
        """Put the files in run order and write summary.json (once; {} when no row was written)."""
        if self.outcome.summary is not None:
            return self.outcome.summary
        if self._files is None:
            return {}
        from apibank_bench.llm.router import merge_snapshots

        cfg = self.cfg
        wall_time = time.time() - self.started
        endpoints = [self.endpoint_counts()]
        answers = {"answers": self.tally.answers, "at_max_tokens": self.tally.cut_answers}
        if cfg.resume:  # a resumed run's time and requests include the parts before
            try:
                before = read_summary(self._files.out_dir) or {}
            except UnsupportedSchemaVersion:
                raise  # a newer release's summary is not read as a cut one
            except ValueError:
                before = {}  # a summary cut by a kill: its time is lost, the results are not
            wall_time += before.get("wall_time_s") or 0
            endpoints.append(before.get("endpoints") or {})
            earlier = before.get("answers_at_max_tokens") or {}
            answers = {key: value + (earlier.get(key) or 0) for key, value in answers.items()}
        deselected = self.deselected()
        cases = self.cases()
        # `cases` count (instance, epoch) pairs (runs.epochs): with one epoch they are the instances
        chosen = self.selection
        selection = {"cases": len(cases), "instances": len(self.instance_ids()), "epochs": cfg.epochs,
                     "finished_before": len(cases) - len(chosen.to_run), "deselected": len(deselected),
                     "pytest": chosen.narrowing, **({"other_selection": chosen.other} if chosen.other else {})}
        self.outcome.summary = self._files.finalize(cases, config=self.metadata(), wall_time_s=wall_time, deselected=deselected,
                                           extra={"endpoints": merge_snapshots(endpoints), "selection": selection,
                                                  "forced": self._record.get("forced", []),
                                                  "answers_at_max_tokens": answers,
                                                  "closed_connections": self.closed_connections(),
                                                  **({"stopped": self.outcome.stopped} if self.outcome.stopped
                                                     else {})})
        return self.outcome.summary

    def metadata(self) -> dict:
        """summary.json's `config`: the settings and the provenance."""
        from apibank_bench.runs.provenance import provenance

        from apibank_bench.agents.topologies import as_run

        base_url = self.cfg.base_url[0] if self.cfg.base_url else self.parts.local_url  # where the model answered
        ran = self.cfg if self.cfg.is_gold else as_run(self.cfg)[1]
        # `ran`: the topology and agent kind that ran (an alias's target), so that readers of the folder (compare's
        # pairing of modes) need not load the topologies to resolve an alias
        return {"run": self.cfg.to_dict(), "ran": {"topology": ran.topology, "agent_kind": ran.agent_kind},
                **provenance(self.cfg, self.instance_ids(), self.started_at, base_url, self.parts.built_models)}


#: More than this share of the model's answers stopping at max_tokens is worth a warning (once the run has
#: `CUT_MIN_ANSWERS` answers, or at its end): a model that rambles, or a server with no chat template for it.
CUT_SHARE, CUT_MIN_ANSWERS = 0.25, 8
CUT_TEXTS_KEPT = 20  #: cut answers kept to tell which fix applies (a model that writes the next turns)
