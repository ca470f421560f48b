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
import time
from pathlib import Path

import pytest

from apibank_bench.runs.instances import ERROR, error_result
from apibank_bench.runs.provenance import now
from apibank_bench.runs.folder import FolderTaken, decide, write_record
from apibank_bench.runs.results import RunFiles, read_summary
from apibank_bench.runs.summary import add_summary_to_json_report, table_lines
from apibank_bench.data.tasks import get_task
from apibank_bench.plugin import ids_to_run, narrowing, run_config, selected_cases, selected_ids, task_id_of
from apibank_bench.runs.epochs import row_key, split_case
from apibank_bench.plugin.keys import MODEL, USER_PROPERTY

PROGRESS_EVERY_S = 10.0


class Writer:
    def __init__(self, config) -> None:
        self.config = config
        self.files: RunFiles | None = None
        self.started = time.time()
        self.started_at = now()
        self.seen: set[tuple[str, int]] = set()  #: (instance, epoch) keys written
        self.done = self.correct = self.errors = 0
        self.last_progress = time.monotonic()
        self.summary: dict | None = None
        self.total = 0  #: instances this run will run (resumed ones left out)
        self.to_run: list[str] = []  #: the selection less what a resumed run finished
        self.collected: set[str] | None = None  #: what pytest collected of it (after -k, --lf...)
        self.keep = False  #: keep the folder's lines (resume, or a pytest-narrowed rerun)
        self.forced: list[str] = []  #: measured settings that differ from the folder's run (--force)
        self.record: dict = {}

    def pytest_sessionstart(self) -> None:
        from apibank_bench.plugin import bench_requested

        if not bench_requested(self.config):
            return
        cfg = run_config(self.config)
        try:  # before anything runs: a refused run leaves the folder as it was
            decision = decide(Path(cfg.results_dir), cfg, narrowed=bool(narrowing(self.config)))
        except FolderTaken as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        self.keep, self.forced = decision.keep, decision.forced
        self.to_run = ids_to_run(self.config)
        self.total = len(self.to_run)

    # -- what pytest runs of the selection ---------------------------------------------------

    def pytest_collection_finish(self, session) -> None:
        self.collected_ids([item.nodeid for item in session.items])

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

    # -- rows ----------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report) -> None:
        payloads = [json.loads(value) for key, value in report.user_properties if key == USER_PROPERTY]
        if payloads:
            self.add(payloads[0])
        elif report.failed and report.when not in ("setup", "call", "teardown"):
            self.add_crash(report)

    def add_crash(self, report) -> None:
        """A test whose process died (an xdist worker crash): an error row, so no instance goes missing."""
        nodeid = report.nodeid
        if "test_apibank[" not in nodeid:
            return
        task_id, epoch = split_case(nodeid.split("[", 1)[1][:-1])
        try:
            task = get_task(task_id, root=run_config(self.config).root)
        except (KeyError, ValueError, OSError):
            return
        message = f"harness crash: the test process died ({str(report.longrepr).strip().splitlines()[0][:200]})"
        self.add(error_result(task, message, epoch).payload)

    def add(self, payload: dict) -> None:
        result = payload["result"]
        if row_key(result) in self.seen:
            return
        self.seen.add(row_key(result))
        if self.files is None:
            cfg = run_config(self.config)
            self.files = RunFiles(Path(cfg.results_dir), resume=self.keep)
            self.record = write_record(self.files.out_dir, cfg, self.started_at, self.forced)
        self.files.append(payload["prediction"], result, payload.get("trace"))
        if not self.done:  # the first line comes PROGRESS_EVERY_S after the first instance, not after start-up
            self.last_progress = time.monotonic()
        self.done += 1
        self.correct += bool(result["correct"])
        self.errors += result["stage"] == ERROR
        if time.monotonic() - self.last_progress >= PROGRESS_EVERY_S:
            self.progress()

    def progress(self) -> None:
        self.last_progress = time.monotonic()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        total = self.total
        completed = self.done - self.errors
        rate = self.done / max(time.time() - self.started, 1e-9)
        parts = [f"{self.done}/{total} instances", f"accuracy {self.correct / completed:.1%} of {completed} completed"
                 if completed else "no instance completed yet", f"{self.errors} errors", f"{rate:.2f}/s"]
        client = self.config.stash.get(MODEL, None)
        in_flight = getattr(getattr(client, "limiter", None), "active", None)
        if in_flight is not None:
            parts.append(f"{in_flight} requests in flight, {getattr(client, 'waiting', 0)} waiting to retry")
        reporter.write_line("apibank: " + " · ".join(parts))

    # -- the end ---------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report) -> None:
        self.pytest_sessionfinish()  # pytest-json-report writes its report before our sessionfinish runs
        add_summary_to_json_report(json_report, self.summary)

    def pytest_sessionfinish(self) -> None:
        if self.files is not None and self.summary is None:
            cfg = run_config(self.config)
            wall_time = time.time() - self.started
            endpoint = self.config.pluginmanager.get_plugin("apibank-endpoint")
            endpoints = [endpoint.endpoint_counts()] if endpoint else []
            if cfg.resume:  # a resumed run's time and requests include the parts before
                try:
                    before = read_summary(self.files.out_dir) or {}
                except ValueError:
                    before = {}  # a summary cut by a kill: its time is lost, the results are not
                wall_time += before.get("wall_time_s") or 0
                endpoints.append(before.get("endpoints") or {})
            from apibank_bench.llm.router import merge_snapshots

            deselected = self.deselected()
            cases = selected_cases(self.config)
            selection = {"instances": len(cases), "finished_before": len(cases) - len(self.to_run),
                         "deselected": len(deselected), "pytest": narrowing(self.config)}
            self.summary = self.files.finalize(cases, config=self.metadata(cfg), wall_time_s=wall_time,
                                               deselected=deselected,
                                               extra={"endpoints": merge_snapshots(endpoints), "selection": selection,
                                                      "forced": self.record.get("forced", [])})

    def metadata(self, cfg) -> dict:
        from apibank_bench.runs.provenance import provenance

        endpoint = self.config.pluginmanager.get_plugin("apibank-endpoint")
        local = endpoint.local.started_url if endpoint and endpoint.local else None
        base_url = cfg.base_url[0] if cfg.base_url else local  # where the model answered
        return {"run": cfg.to_dict(), **provenance(cfg, selected_ids(self.config), self.started_at, base_url)}

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.summary:
            print_table(terminalreporter, run_config(self.config), self.summary)





def print_table(terminalreporter, cfg, summary: dict) -> None:
    model = summary["config"].get("model", {}).get("model", "?")
    label = "gold calls (harness self-check, no model)" if cfg.is_gold else f"{cfg.topology} / {model}"
    terminalreporter.section(f"API-Bank: {label}")
    for line in table_lines(summary):
        terminalreporter.write_line(line)
    selection = summary.get("selection") or {}
    if selection.get("deselected"):
        by = ", ".join(f"{name} {value}" if not isinstance(value, bool) else name
                       for name, value in selection.get("pytest", {}).items())
        terminalreporter.write_line(f"selection: {selection['deselected']} of the {selection['instances']} selected "
                                    f"instances deselected by pytest ({by}); they are not counted as not run")
    for forced in summary.get("forced") or []:
        terminalreporter.write_line(f"FORCED ({forced['at']}): this folder's run continued with other settings: "
                                    + "; ".join(forced["differences"]), yellow=True)
    if not summary.get("complete", True):
        terminalreporter.write_line(
            f"INCOMPLETE: {summary.get('errors', 0)} instances errored and {summary.get('not_run', 0)} did not run; "
            "`accuracy` counts them as not correct. Rerun with --apibank-resume to finish.", red=True, bold=True)
    terminalreporter.write_line(f"results: {Path(cfg.results_dir).resolve()}")
