"""One benchmark run's state, headless: its settings, selection, folder, written rows, tallies, model
client, instance pool, summary and the gate's verdict.

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
from typing import Any, Callable

from apibank_bench.core import settings
from apibank_bench.core.interrupt import deferred
from apibank_bench.data.manifests import select
from apibank_bench.runs.epochs import run_cases, split_case
from apibank_bench.runs.folder import decide, other_selection, write_record
from apibank_bench.runs.instances import InstancePool, InstanceResult, RunStopped, instances_in_flight
from apibank_bench.runs.naming import results_dir
from apibank_bench.runs.provenance import now
from apibank_bench.runs.results import (PREDICTIONS, RESULTS, RunFiles, finished_keys, read_rows, read_summary,
                                        unreadable_lines)
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.versions import UnsupportedSchemaVersion

OVERFLOW = "ContextLengthError"  #: in the error of a row whose prompt did not fit the server's context (llm.http)


class EmptySelection(ValueError):
    """The settings select no instance."""


class BenchmarkRun:
    """One run: what it selects, what it has written, and what it concluded."""

    def __init__(self, cfg: Any, narrowing: dict | None = None) -> None:
        self.cfg = cfg  #: the resolved settings (core.settings.RunConfig)
        self.narrowing = narrowing or {}  #: pytest options that run part of the selection (`-k`, `--lf`...)
        self.started = time.time()
        self.started_at = now()
        self.running_since = self.started  #: when instances began (the rate leaves start-up out)
        self._cases: list[str] | None = None
        self.to_run: list[str] = []  #: the selection less what a resumed run finished
        self.collected: set[str] | None = None  #: the cases pytest collected of it (after -k, --lf...)
        self.total = 0  #: cases this run will run
        self.keep = False  #: keep the folder's lines (resume, or a narrowed rerun)
        self.forced: list[str] = []  #: measured settings that differ from the folder's run (--force)
        self.other_selection: list[str] = []  #: how the selection of the folder's run differs, when narrowed into it
        self.files: RunFiles | None = None
        self.record: dict = {}  #: run.json
        self.seen: set[tuple[str, int]] = set()  #: (instance, epoch) keys written
        self.done = self.correct = self.errors = self.cache_hits = 0
        self.answers = self.cut_answers = 0  #: the model's answers, and those that stopped at max_tokens
        self.cut_texts: list[str] = []  #: the first few of those (which fix applies: runs.cut_answers)
        self.error_reasons: dict[str, str] = {}  #: an error row's reason code -> the first error message with it
        self.model: Any = None  #: this process's model client (None for the gold self-check)
        self.pool: InstancePool | None = None  #: this process's instances in flight
        self.local_url: str | None = None  #: the embedded model's URL, if this run started it
        #: starts an embedded model on first call (the run's own, or the `--model` value given), its URL
        self.endpoint_url: Callable[..., str] | None = None
        self.worker_counts: list[dict] = []  #: each finished xdist worker's requests per endpoint
        self.worker_closed: list[dict] = []  #: each finished xdist worker's closed connections
        self.stopped: str | None = None  #: why the run stopped early (the breaker, -x)
        self.summary: dict | None = None
        self.verdict: Any = None  #: the regression gate's (reports.gate.Verdict), when given a baseline

    @property
    def out_dir(self) -> Path:
        """The run's results folder (`--out-dir`, else named from the settings: runs.naming)."""
        return Path(results_dir(self.cfg))

    # -- the selection ---------------------------------------------------------------------

    def cases(self) -> list[str]:
        """The selection's cases (runs.epochs: one per instance and epoch, a shard's share) in run order,
        before resume. A bad selection is a ValueError (FileNotFoundError for a missing manifest)."""
        if self._cases is None:
            cfg = self.cfg
            ids = select(cfg.level, cfg.limit, cfg.offset, cfg.only or None)
            self._cases = run_cases(ids, cfg.epochs, cfg.shard)
        return self._cases

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
        if self.collected is None:
            return []
        return [case for case in self.to_run if case not in self.collected]

    def collect(self, cases: list[str]) -> None:
        """What pytest runs of the selection (the first collection seen counts)."""
        if self.collected is None:
            self.collected = set(cases)
            self.total = len(self.collected)

    # -- the folder ------------------------------------------------------------------------

    def open_folder(self) -> None:
        """Decide, before anything runs, whether this run may write its folder (runs.folder.decide raises
        FolderTaken), and what it runs."""
        decision = decide(self.out_dir, self.cfg, narrowed=bool(self.narrowing))
        self.keep, self.forced = decision.keep, decision.forced
        if self.keep and self.narrowing:  # `-k` into another selection's folder: its rows join theirs (said)
            self.other_selection = other_selection(self.out_dir, self.cfg)
        self.to_run = self.cases_to_run()
        self.total = len(self.to_run)

    def unreadable(self) -> list[str]:
        """Lines of a kept folder that cannot be read (`results.jsonl line 7`): set aside when this run writes."""
        if not self.keep:
            return []
        return [f"{name} line {number}" for name in (RESULTS, PREDICTIONS)
                for number in unreadable_lines(self.out_dir / name)]

    # -- rows --------------------------------------------------------------------------------

    def add(self, payload: dict) -> ResultRow | None:
        """Write one instance's lines (`InstanceResult.payload`, as they travel); None if its case has a row."""
        row = ResultRow.from_json(payload["result"])
        if row.key in self.seen:
            return None
        self.seen.add(row.key)
        files = self._open_files()
        with deferred():  # an interrupt now would leave a row without its trace
            files.append(payload["prediction"], row, payload.get("trace"))
        self.done += 1
        self.correct += row.is_correct
        if row.is_error:
            self.errors += 1
            self.error_reasons.setdefault(str(row.reason), str(row.error or "?")[:160])
        turns = (payload.get("trace") or {}).get("agents") or ()
        self.cache_hits += sum(bool(turn.get("cached")) for turn in turns)
        reasons = [turn["finish_reason"] for turn in turns if turn.get("finish_reason")]
        self.answers += len(reasons)
        self.cut_answers += reasons.count("length")
        self.cut_texts += [str(turn.get("answer") or "") for turn in turns
                           if turn.get("finish_reason") == "length"][:CUT_TEXTS_KEPT - len(self.cut_texts)]
        return row

    def _open_files(self) -> RunFiles:
        """The folder's files, opened (and run.json written) with the first row this run writes."""
        if self.files is None:
            self.files = RunFiles(self.out_dir, resume=self.keep)
            self.record = write_record(self.files.out_dir, self.cfg, self.started_at, self.forced)
        return self.files

    def add_result(self, result: InstanceResult) -> ResultRow | None:
        return self.add(result.payload)

    def warnings(self, row: ResultRow | None = None) -> list[tuple[str, str]]:
        """What the user can fix, as (kind, line): a prompt longer than the server's context, and answers
        that keep stopping at max_tokens (`row` None: the run's end, when fewer answers suffice)."""
        found = []
        if row is not None and row.is_error and OVERFLOW in str(row.error):
            found.append(("overflow", f"apibank: warning: {row.error}"))
        if self.cut_answers > CUT_SHARE * self.answers and (self.answers >= CUT_MIN_ANSWERS or row is None):
            fix, what = self.cut_fix()
            found.append(("cut", f"apibank: warning: {self.cut_answers} of {self.answers} model answers stopped at "
                          f"max_tokens ({self.cfg.max_tokens}), and answers cut off seldom hold a call; the fix is "
                          f"the {fix}: {what}; summary.json counts them (answers_at_max_tokens)"))
        return found

    def cut_fix(self) -> tuple[str, str]:
        """Which fix applies to answers that stop at max_tokens (runs.cut_answers), for `--model` at its endpoint."""
        from apibank_bench.agents.models import endpoint_models
        from apibank_bench.runs.cut_answers import cut_fix

        models = endpoint_models(self.cfg.base_url[0]) if self.cfg.base_url else None
        return cut_fix(self.cfg, models, self.cut_texts)

    # -- solving, headless -----------------------------------------------------------------------

    def start_pool(self, cases: list[str], solver: Any, scorer: Any, load: Callable | None = None) -> InstancePool:
        """This process's instance pool, its first cases queued; a tripped breaker stops it."""
        from apibank_bench.agents.team_models import TeamModels
        from apibank_bench.data.tasks import get_task

        cfg = self.cfg
        batches = self.model is not None and TeamModels.of(self.model).batches  # a wide server: a wide pool
        self.pool = InstancePool(load or (lambda task_id: get_task(task_id, root=scorer.root)), solver, scorer,
                                 concurrency=instances_in_flight(cfg, batches), time_limit=cfg.instance_timeout or None)
        if self.model is not None:
            self.model.breaker.on_trip(self.pool.stop)
        self.pool.start(cases)
        return self.pool

    def solve(self, model: Any = None, solver: Any = None, scorer: Any = None,
              on_result: Callable[[InstanceResult], None] | None = None) -> dict:
        """Solve, score and write every case left to run, in order; returns the summary. `model`: the chat
        client (built from the settings when not given; None for the gold self-check)."""
        from apibank_bench.agents import build_solver
        from apibank_bench.core.paths import require_root
        from apibank_bench.scoring.scorer import Scorer

        if not self.to_run and self.files is None and not self.seen:
            self.open_folder()
        local = None
        if model is None and not self.cfg.is_gold:
            from apibank_bench.agents.models import model_client, needs_local_server

            if self.endpoint_url is None and needs_local_server(self.cfg):  # the embedded model, for this run
                local = self._start_embedded()
            model = model_client(self.cfg, self.endpoint_url)
        self.model = model
        scorer = scorer or Scorer(require_root(self.cfg.root), self.cfg.toolsearcher_scorer)
        pool = self.start_pool(self.to_run, solver or build_solver(self.cfg, model), scorer)
        self.running_since = time.time()
        try:
            for case in self.to_run:
                try:
                    result = pool.result(case)
                except RunStopped as exc:
                    self.stopped = str(exc)
                    break
                self.add_result(result)
                if on_result is not None:
                    on_result(result)
        finally:
            pool.close()
            if local is not None:
                local.stop()
        self.hold_rows()
        return self.finish()

    def hold_rows(self) -> None:
        """A resumed run with nothing left to run (finished, or killed before its summary) summarizes the
        folder's rows: its summary and closing table are the folder's."""
        if self.keep and not self.to_run and (self.out_dir / RESULTS).exists():
            self._open_files()

    def _start_embedded(self) -> Any:
        """The run's embedded models (llm.embedded_launcher), each started on first use; its URL is where the
        run's own model answered."""
        local = self.embedded_servers()

        def url(model: str | None = None) -> str:
            started = local.url(model)
            self.local_url = local.started_url
            return started

        self.endpoint_url = url
        return local

    def embedded_servers(self, announce: Callable[[str], None] = lambda title: None) -> Any:
        """The run's embedded models, not started yet (agents.models.embedded_servers): a file of the user's
        gets a context sized from this run's prompts."""
        from apibank_bench.agents.models import embedded_servers

        return embedded_servers(self.cfg, self.instance_ids, announce)

    # -- the end ---------------------------------------------------------------------------------

    def endpoint_counts(self) -> dict:
        """The run's requests per endpoint: this process's and its workers' (URL credentials masked)."""
        from apibank_bench.core.redact import redact
        from apibank_bench.llm.router import merge_snapshots

        own = {}
        if self.model is not None:
            counts = self.model.endpoint_counts() if hasattr(self.model, "endpoint_counts") \
                else self.model.endpoint_report()
            own = {redact(url): part for url, part in counts.items()}
        return merge_snapshots([own, *self.worker_counts])

    def own_closed(self) -> dict:
        """The connections the server closed on this process's requests, and the in-flight limit that held."""
        if self.model is None:
            return {}
        return {"count": self.model.closed.count, "most_in_flight": self.model.closed.most_in_flight,
                "in_flight_limit": self.model.in_flight_limit()}

    def closed_connections(self) -> dict:
        """Closed connections summed over the run's processes (so are their in-flight limits), and the most
        in flight at a close in any one of them."""
        parts = [part for part in (self.own_closed(), *self.worker_closed) if part]
        if not parts:
            return {}
        return {"count": sum(part["count"] for part in parts),
                "most_in_flight": max(part["most_in_flight"] for part in parts),
                "in_flight_limit": sum(part["in_flight_limit"] for part in parts)}

    def finish(self) -> dict:
        """Put the files in run order and write summary.json (once; {} when no row was written)."""
        if self.summary is not None:
            return self.summary
        if self.files is None:
            return {}
        from apibank_bench.llm.router import merge_snapshots

        cfg = self.cfg
        wall_time = time.time() - self.started
        endpoints = [self.endpoint_counts()]
        answers = {"answers": self.answers, "at_max_tokens": self.cut_answers}
        if cfg.resume:  # a resumed run's time and requests include the parts before
            try:
                before = read_summary(self.files.out_dir) or {}
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
        selection = {"cases": len(cases), "instances": len(self.instance_ids()), "epochs": cfg.epochs,
                     "finished_before": len(cases) - len(self.to_run), "deselected": len(deselected),
                     "pytest": self.narrowing, **({"other_selection": self.other_selection} if self.other_selection
                                                  else {})}
        self.summary = self.files.finalize(cases, config=self.metadata(), wall_time_s=wall_time, deselected=deselected,
                                           extra={"endpoints": merge_snapshots(endpoints), "selection": selection,
                                                  "forced": self.record.get("forced", []),
                                                  "answers_at_max_tokens": answers,
                                                  "closed_connections": self.closed_connections(),
                                                  **({"stopped": self.stopped} if self.stopped else {})})
        return self.summary

    def metadata(self) -> dict:
        """summary.json's `config`: the settings and the provenance."""
        from apibank_bench.runs.provenance import provenance

        from apibank_bench.agents.topologies import as_run

        base_url = self.cfg.base_url[0] if self.cfg.base_url else self.local_url  # where the model answered
        ran = self.cfg if self.cfg.is_gold else as_run(self.cfg)[1]
        # `ran`: the topology and agent kind that ran (an alias's target), so that readers of the folder (compare's
        # pairing of modes) need not load the topologies to resolve an alias
        return {"run": self.cfg.to_dict(), "ran": {"topology": ran.topology, "agent_kind": ran.agent_kind},
                **provenance(self.cfg, self.instance_ids(), self.started_at, base_url)}


#: More than this share of the model's answers stopping at max_tokens is worth a warning (once the run has
#: `CUT_MIN_ANSWERS` answers, or at its end): a model that rambles, or a server with no chat template for it.
CUT_SHARE, CUT_MIN_ANSWERS = 0.25, 8
CUT_TEXTS_KEPT = 20  #: cut answers kept to tell which fix applies (a model that writes the next turns)
