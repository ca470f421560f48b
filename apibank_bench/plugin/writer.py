"""The controller's side of a run: the out dir, progress lines, the summary and the closing table.

Only this process writes the out dir, and only if `runs.folder.decide` lets it:
one run per folder (a fresh run into another run's folder is refused before anything
runs, unless `--apibank-overwrite`; `--apibank-resume` and a pytest-narrowed session
(`--lf`, `-k`...) keep the folder's lines, if its run measured the same settings).
A fresh run empties the folder when its first instance is written, so a run that
fails before any instance leaves the earlier results alone.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from apibank_bench.runs.instances import error_result
from apibank_bench.scoring.stage import Reason, Stage
from apibank_bench.runs.provenance import now
from apibank_bench.runs.folder import FolderTaken, decide, write_record
from apibank_bench.runs.results import PREDICTIONS, RESULTS, UNREADABLE, RunFiles, read_summary, unreadable_lines
from apibank_bench.runs.row import ResultRow
from apibank_bench.runs.summary import add_summary_to_json_report, table_lines
from apibank_bench.runs.team import protocol_words
from apibank_bench.data.tasks import get_task
from apibank_bench.plugin.run import (STOPPED, ids_to_run, narrowing, run_config, selected_cases, selected_ids,
                                      task_id_of)
from apibank_bench.runs.epochs import split_case
from apibank_bench.core.progress import ProgressLine, eta
from apibank_bench.core.settings import flag
from apibank_bench.plugin.interrupt import deferred
from apibank_bench.plugin.keys import COMMAND_OUTPUT, MODEL, USER_PROPERTY

PROGRESS_EVERY_S = 10.0  #: plain progress lines (not a terminal, or pytest's own per-test characters)
#: More than this share of the model's answers stopping at max_tokens is worth a warning (once the run has
#: `CUT_MIN_ANSWERS` answers, or at its end): a model that rambles, or a server with no chat template for it.
CUT_SHARE, CUT_MIN_ANSWERS = 0.25, 8
OVERFLOW = "ContextLengthError"  #: in the error of a row whose prompt did not fit the server's context (llm.http)


class Writer:
    def __init__(self, config) -> None:
        self.config = config
        self.files: RunFiles | None = None
        self.started = time.time()
        self.started_at = now()
        self.seen: set[tuple[str, int]] = set()  #: (instance, epoch) keys written
        self.written_nodes: set[str] = set()  #: test IDs whose report's line was taken
        self.done = self.correct = self.errors = self.cache_hits = 0
        self.error_reasons: dict[str, str] = {}  #: an error row's reason code -> the first error message with it
        self.last_progress = time.monotonic()
        self.summary: dict | None = None
        self.total = 0  #: instances this run will run (resumed ones left out)
        self.to_run: list[str] = []  #: the selection less what a resumed run finished
        self.collected: set[str] | None = None  #: what pytest collected of it (after -k, --lf...)
        self.keep = False  #: keep the folder's lines (resume, or a pytest-narrowed rerun)
        self.forced: list[str] = []  #: measured settings that differ from the folder's run (--force)
        self.record: dict = {}
        self.line: ProgressLine | None = None  #: the live line, under `apibank-bench run`
        self.line_started = False
        self.stopped: str | None = None  #: why the run stopped early (the breaker, -x), from a skipped test
        self.running_since = self.started  #: when instances began (the rate leaves start-up out)
        self.answers = self.cut_answers = 0  #: the model's answers, and those that stopped at max_tokens
        self.said: set[str] = set()  #: the warnings given (each is given once)

    def pytest_sessionstart(self) -> None:
        from apibank_bench.plugin.run import bench_requested

        if not bench_requested(self.config):
            return
        cfg = run_config(self.config)
        try:  # before anything runs: a refused run leaves the folder as it was
            decision = decide(Path(cfg.results_dir), cfg, narrowed=bool(narrowing(self.config)))
        except FolderTaken as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        self.keep, self.forced = decision.keep, decision.forced
        if self.keep:
            self.say_unreadable(Path(cfg.results_dir))
        self.to_run = ids_to_run(self.config)
        self.total = len(self.to_run)

    def say_unreadable(self, out_dir: Path) -> None:
        """Lines of the kept folder that cannot be read are named (file and line), never passed over: they are
        set aside in `<file>.unreadable` when this run writes, and their instances have no row (so run again)."""
        found = [f"{name} line {number}" for name in (RESULTS, PREDICTIONS)
                 for number in unreadable_lines(out_dir / name)]
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if found and reporter is not None:
            reporter.write_line(f"apibank: {out_dir}: unreadable (half-written or corrupted): {', '.join(found)}; "
                                f"kept in {RESULTS}{UNREADABLE} / {PREDICTIONS}{UNREADABLE}, their instances have "
                                "no row and count as not run", yellow=True)

    # -- what pytest runs of the selection ---------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:  # the controller of an xdist run
        self.collected_ids(ids)

    def collected_ids(self, nodeids) -> None:
        if self.collected is None:
            self.collected = {task_id for task_id in map(task_id_of, nodeids) if task_id}
            self.total = len(self.collected)

    def deselected(self) -> list[str]:
        """Instances of the selection that pytest did not collect (`-k`, `--deselect`, `--lf`, test IDs)."""
        if self.collected is None:
            return []
        return [task_id for task_id in self.to_run if task_id not in self.collected]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session) -> None:
        """What pytest runs of the selection; then, under `apibank-bench run`, pytest prints nothing per test,
        so the progress line owns the screen while instances run: redrawn in place on a terminal, a plain
        line every 10 s otherwise."""
        self.collected_ids([item.nodeid for item in session.items])
        self.running_since = time.time()
        self.start_line()

    def start_line(self) -> None:
        """Once: at the end of collection, or (an xdist controller collects nothing) at the first result."""
        from apibank_bench.plugin.run import quiet_tests

        if self.line_started or not self.total or not quiet_tests(self.config):
            return
        self.line_started = True
        stream = terminal_stream(self.config)
        if stream is not None:
            self.line = ProgressLine(self.progress_text, stream, every_s=PROGRESS_EVERY_S).start()

    def stop_line(self) -> None:
        if self.line is not None:
            self.line.stop()
            self.line.stream.close()  # our own handle on the terminal (terminal_stream)
            self.line = None

    # -- rows ----------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report) -> None:
        # The line is recorded in the setup phase, so the call's and teardown's reports carry it too: the
        # first report of a test that carries it is written (reading it again would cost as much each time).
        if report.skipped and self.stopped is None and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.stopped = reason.removeprefix(STOPPED) if reason.startswith(STOPPED) else None
        if report.nodeid in self.written_nodes:
            return
        payloads = [json.loads(value) for key, value in report.user_properties if key == USER_PROPERTY]
        if payloads:
            self.written_nodes.add(report.nodeid)
            self.add(payloads[0])

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report, sched) -> None:
        """xdist: the worker running `crashitem` died. An instance's case gets an error row, so none goes missing."""
        case = crashitem.partition("[")[2][:-1]  # a case's pytest ID is its case ID (plugin.pytest_generate_tests)
        if case not in set(selected_cases(self.config)):
            return None  # not one of this run's cases
        task_id, epoch = split_case(case)
        try:
            task = get_task(task_id, root=run_config(self.config).root)
        except (KeyError, ValueError, OSError):
            return None
        message = f"harness crash: the test process died ({str(report.longrepr).strip().splitlines()[0][:200]})"
        self.add(error_result(task, message, epoch, reason=Reason.ERROR_WORKER_CRASH).payload)
        return None  # the report stays a failure; xdist does not reschedule the case

    def add(self, payload: dict) -> None:
        row = ResultRow.from_json(payload["result"])
        if row.key in self.seen:
            return
        self.seen.add(row.key)
        if self.files is None:
            cfg = run_config(self.config)
            self.files = RunFiles(Path(cfg.results_dir), resume=self.keep)
            self.record = write_record(self.files.out_dir, cfg, self.started_at, self.forced)
        with deferred():  # an interrupt now would leave a row without its trace
            self.files.append(payload["prediction"], row, payload.get("trace"))
        if not self.done:  # the first line comes PROGRESS_EVERY_S after the first instance, not after start-up
            self.last_progress = time.monotonic()
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
        self.start_line()
        self.warn_once(row)
        if self.line is not None:
            self.line.update()

    def warn_once(self, row: ResultRow | None = None) -> None:
        """Say once what the user can fix: a prompt longer than the server's context (with both sizes),
        and answers that keep stopping at max_tokens."""
        if row is not None and row.is_error and OVERFLOW in str(row.error) and "overflow" not in self.said:
            self.said.add("overflow")
            self.say(f"apibank: warning: {row.error}")
        if "cut" not in self.said and self.cut_answers > CUT_SHARE * self.answers and (
                self.answers >= CUT_MIN_ANSWERS or row is None):
            self.said.add("cut")
            self.say(f"apibank: warning: {self.cut_answers} of {self.answers} model answers stopped at max_tokens "
                     f"({run_config(self.config).max_tokens}): the model rambles, or the server applies no chat "
                     "template for it (llama-cpp-python: --chat_format), and answers cut off seldom hold a call; "
                     "summary.json counts them (answers_at_max_tokens)")

    def say(self, text: str) -> None:
        """A line of its own: above the progress line, or among pytest's output."""
        if self.line is not None:
            self.line.say(text)
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self) -> None:
        """A plain progress line once a test is over (so after its character), every PROGRESS_EVERY_S."""
        due = time.monotonic() - self.last_progress >= PROGRESS_EVERY_S
        if self.line is None and 0 < self.done < self.total and due:
            self.progress()

    def progress_text(self) -> str:
        """Where the run is, in one line: done/total, running accuracy, errors, the model's activity, rate, ETA."""
        elapsed = time.time() - self.running_since
        completed = self.done - self.errors
        parts = [f"{self.done}/{self.total} instances",
                 f"accuracy {self.correct / completed:.1%} of {completed}" if completed else "none completed yet",
                 f"{self.errors} errors"]
        activity = model_activity(self.config.stash.get(MODEL, None))
        if "in_flight" in activity:
            parts.append(f"{activity['in_flight']} requests in flight"
                         + (f" (limit {activity['limit']})" if "limit" in activity else "")
                         + (f", {activity['waiting']} waiting to retry" if "waiting" in activity else ""))
        parts.append(f"{activity.get('cache_hits', self.cache_hits)} cache hits")
        parts.append(f"{self.done / max(elapsed, 1e-9):.2f}/s")
        left = eta(self.done, self.total, elapsed)
        if left is not None and self.done < self.total:
            parts.append(f"ETA {left}")
        return "apibank: " + " · ".join(parts)

    def progress(self) -> None:
        """A plain progress line between pytest's per-test characters, never inside their line."""
        self.last_progress = time.monotonic()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        reporter.write(self.progress_text(), flush=True)
        reporter.currentfspath = None  # pytest ends this line, and starts its next character under its file name

    # -- the end ---------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report) -> None:
        self.pytest_sessionfinish()  # pytest-json-report writes its report before our sessionfinish runs
        add_summary_to_json_report(json_report, self.summary)

    def pytest_sessionfinish(self) -> None:
        self.warn_once()  # a run too short to warn on the way
        self.stop_line()  # before pytest's closing lines
        if self.files is not None and self.summary is None:
            cfg = run_config(self.config)
            wall_time = time.time() - self.started
            endpoint = self.config.pluginmanager.get_plugin("apibank-endpoint")
            endpoints = [endpoint.endpoint_counts()] if endpoint else []
            answers = {"answers": self.answers, "at_max_tokens": self.cut_answers}
            if cfg.resume:  # a resumed run's time and requests include the parts before
                try:
                    before = read_summary(self.files.out_dir) or {}
                except ValueError:
                    before = {}  # a summary cut by a kill: its time is lost, the results are not
                wall_time += before.get("wall_time_s") or 0
                endpoints.append(before.get("endpoints") or {})
                earlier = before.get("answers_at_max_tokens") or {}
                answers = {key: value + (earlier.get(key) or 0) for key, value in answers.items()}
            from apibank_bench.llm.router import merge_snapshots

            deselected = self.deselected()
            cases = selected_cases(self.config)
            selection = {"instances": len(cases), "finished_before": len(cases) - len(self.to_run),
                         "deselected": len(deselected), "pytest": narrowing(self.config)}
            self.summary = self.files.finalize(cases, config=self.metadata(cfg), wall_time_s=wall_time,
                                               deselected=deselected,
                                               extra={"endpoints": merge_snapshots(endpoints), "selection": selection,
                                                      "forced": self.record.get("forced", []),
                                                      "answers_at_max_tokens": answers,
                                                      "closed_connections": endpoint.closed_connections()
                                                      if endpoint else {},
                                                      **({"stopped": self.stopped} if self.stopped else {})})

    def metadata(self, cfg) -> dict:
        from apibank_bench.runs.provenance import provenance

        endpoint = self.config.pluginmanager.get_plugin("apibank-endpoint")
        local = endpoint.local.started_url if endpoint and endpoint.local else None
        base_url = cfg.base_url[0] if cfg.base_url else local  # where the model answered
        return {"run": cfg.to_dict(), **provenance(cfg, selected_ids(self.config), self.started_at, base_url)}

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The closing table, under pytest; `apibank-bench run` prints it itself, as its last lines."""
        if self.summary and not self.config.stash.get(COMMAND_OUTPUT, False):
            terminalreporter.write_line("")
            for line in closing_lines(run_config(self.config), self.summary, self.error_reasons,
                                      terminalreporter._tw.fullwidth):
                terminalreporter.write_line(line)

    def pytest_unconfigure(self) -> None:
        self.stop_line()


def model_activity(client) -> dict:
    """What this process's model client is doing now: requests in flight, waiting to retry, cache hits.

    Only what the model layer counts is shown (none under xdist, where the clients live in the workers).
    """
    if client is None:
        return {}
    activity = {}
    limiters = [getattr(one, "limiter", None) for one in getattr(client, "clients", [client])]  # a model per role
    if limiters and None not in limiters:
        activity["in_flight"] = sum(limiter.active for limiter in limiters)
        limits = [getattr(limiter, "limit", None) for limiter in limiters]
        if all(isinstance(limit, int) for limit in limits):  # learned from the endpoints (llm/limit.py)
            activity["limit"] = sum(limits)
    if isinstance(getattr(client, "waiting", None), int):  # the model layer's count of requests between retries
        activity["waiting"] = client.waiting
    stats = client.stats.snapshot() if hasattr(client, "stats") else {}
    if stats.get("cache_hits") is not None:
        activity["cache_hits"] = stats["cache_hits"]
    return activity


def terminal_stream(config):
    """A handle on the real standard output, which pytest's output capture (dup2 of fd 1 during each
    test) does not reach: the progress line is drawn from a background thread while tests wait."""
    try:
        return os.fdopen(os.dup(config.get_terminal_writer()._file.fileno()), "w", encoding="utf-8",
                         errors="replace", closefd=True)
    except (AttributeError, OSError, ValueError):
        return None


def closing_lines(cfg, summary: dict, error_reasons: dict[str, str] | None = None, width: int = 80) -> list[str]:
    """The closing table: a rule with the run's name, the table, what is incomplete, and where the results are;
    `error_reasons`: an error reason code -> an example message (the counts are the summary's)."""
    model = summary["config"].get("model", {}).get("model", "?")
    label = "gold calls (harness self-check, no model)" if cfg.is_gold else f"{cfg.topology} / {model}"
    protocol = protocol_words(cfg.to_dict())
    if protocol:
        label = f"{cfg.topology} ({protocol}) / {model}"
    lines = [f" API-Bank: {label} ".center(width, "="), *table_lines(summary)]
    counts = Counter({code: count for code, count in (summary.get("failures_by_reason") or {}).items()
                      if code.startswith(f"{Stage.ERROR}:")})
    for code, count in counts.most_common(3):
        lines.append(f"{code} x{count}: {(error_reasons or {}).get(code, '-')}")
    selection = summary.get("selection") or {}
    if selection.get("deselected"):
        by = ", ".join(f"{name} {value}" if not isinstance(value, bool) else name
                       for name, value in selection.get("pytest", {}).items())
        lines.append(f"selection: {selection['deselected']} of the {selection['instances']} selected instances "
                     f"deselected by pytest ({by}); they are not counted as not run")
    closed = summary.get("closed_connections") or {}
    if closed.get("count"):
        lines.append(f"the server closed {closed['count']} connections without an answer, with up to "
                     f"{closed['most_in_flight']} requests in flight: it closes connections under load; "
                     f"the in-flight limit that held: {closed['in_flight_limit']} "
                     f"({flag('max_in_flight')} caps it)")
    for forced in summary.get("forced") or []:
        lines.append(f"FORCED ({forced['at']}): this folder's run continued with other settings: "
                     + "; ".join(forced["differences"]))
    if summary.get("unreadable_lines"):
        lines.append(f"UNREADABLE: {summary['unreadable_lines']} lines of {RESULTS} could not be read; their bytes are "
                     f"kept in {RESULTS}{UNREADABLE}, their instances count as not run")
    if summary.get("stopped"):
        lines.append(f"STOPPED: {summary['stopped']}")
    if not summary.get("complete", True):
        lines.append(f"INCOMPLETE: {summary.get('errors', 0)} instances errored and {summary.get('not_run', 0)} did "
                     f"not run; `accuracy` counts them as not correct. Rerun with {flag('resume')} to finish.")
    lines.append(f"results: {Path(cfg.results_dir).resolve()}  (one instance: apibank-bench show ID "
                 f"--out-dir {cfg.results_dir})")
    return lines
