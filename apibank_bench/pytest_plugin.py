"""The pytest plugin: options, one parametrized case per instance, and the results files.

Workers (or the single process) solve and score; each finished instance's
lines travel on its test report (`user_properties`) to the controller, which
alone writes the out dir: appended at once, put in manifest order at the end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from . import config as settings
from .manifests import select
from .results import RunFiles, read_jsonl, to_json
from .tasks import split_combined_id

_KEY = "apibank"
_BENCH_DIR = Path(__file__).resolve().parents[1] / "bench_tests"


# -- options ---------------------------------------------------------------------

def pytest_addoption(parser):
    group = parser.getgroup("apibank", "API-Bank benchmark (also ini apibank_* and env APIBANK_*)")
    for setting in settings.SETTINGS:
        option = "--apibank-" + setting.name.replace("_", "-")
        dest = "apibank_" + setting.name
        if setting.flag:
            group.addoption(option, action="store_const", const="true", dest=dest, default=None, help=setting.help)
            group.addoption("--apibank-no-" + setting.name.replace("_", "-"), action="store_const",
                            const="false", dest=dest, help=f"turn off: {setting.help}")
        elif setting.name == "only":
            group.addoption(option, dest=dest, nargs="+", default=None, help=setting.help)
        else:
            group.addoption(option, dest=dest, default=None, choices=setting.choices, help=setting.help)
        parser.addini(dest, setting.help, default=None)


def run_config(config) -> settings.RunConfig:
    if not hasattr(config, "_apibank_config"):
        try:
            config._apibank_config = settings.resolve(
                lambda s: config.getoption("apibank_" + s.name),
                lambda s: config.getini("apibank_" + s.name),
            )
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    return config._apibank_config


def selected_ids(config) -> list[str]:
    """This run's instances in manifest order (before resume), sharded if asked."""
    if not hasattr(config, "_apibank_ids"):
        cfg = run_config(config)
        try:
            ids = select(cfg.level, cfg.limit, cfg.offset, cfg.only or None)
        except (FileNotFoundError, ValueError) as exc:
            raise pytest.UsageError(f"apibank: {exc}") from None
        if cfg.shard:
            index, count = cfg.shard
            ids = ids[index - 1::count]
        config._apibank_ids = ids
    return config._apibank_ids


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _bench_requested(config) -> bool:
    """Whether this run collects the benchmark (decides if the controller starts a model)."""
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == _BENCH_DIR or _BENCH_DIR in path.parents:
            return True
    return False


# -- collection --------------------------------------------------------------------

def pytest_generate_tests(metafunc):
    if "apibank_task_id" not in metafunc.fixturenames:
        return
    config = metafunc.config
    cfg = run_config(config)
    ids = selected_ids(config)
    if cfg.resume:
        done = {line["id"] for line in read_jsonl(Path(cfg.results_dir) / "results.jsonl")}
        ids = [task_id for task_id in ids if task_id not in done]
    params = [
        pytest.param(task_id, id=task_id, marks=getattr(pytest.mark, f"level{split_combined_id(task_id)[0]}"))
        for task_id in ids
    ]
    metafunc.parametrize("apibank_task_id", params)


# -- the model endpoint: one embedded server per run, shared with xdist workers ----------

class _Endpoint:
    def __init__(self) -> None:
        self.handle = None
        self.url: str | None = None

    def needs_local_model(self, config) -> bool:
        from .agents.models import needs_local_server

        return needs_local_server(run_config(config))

    def start(self, config) -> str:
        if self.url is None:
            from .llm.local_server import ensure_local_server

            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter:
                reporter.write_line("apibank: starting the embedded local model (Gemma 3 270M, a smoke model)")
            self.url, self.handle = ensure_local_server()
        return self.url

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()
            self.handle = self.url = None


_endpoint = _Endpoint()


def local_base_url(config) -> str:
    """The embedded server's URL: from the controller on an xdist worker, else started here."""
    if _is_worker(config) and config.workerinput.get("apibank_base_url"):
        return config.workerinput["apibank_base_url"]
    return _endpoint.start(config)


def pytest_configure_node(node):  # xdist controller, once per worker
    config = node.config
    if _bench_requested(config) and _endpoint.needs_local_model(config):
        node.workerinput["apibank_base_url"] = _endpoint.start(config)


def pytest_unconfigure(config):
    _endpoint.stop()


# -- results: recorded on the item, written by the controller ----------------------------

def record(item, payload: dict) -> None:
    """Attach one instance's lines to its test report (JSON text travels through xdist)."""
    item.stash[_RESULT] = payload["result"]
    item.user_properties.append((_KEY, to_json(payload)))


_RESULT = pytest.StashKey[dict]()


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    """pytest-json-report: each test's result fields."""
    if call.when == "call" and _RESULT in item.stash:
        return {_KEY: item.stash[_RESULT]}
    return None


class _Writer:
    """Controller-side plugin: the out dir, running accuracy, the closing table."""

    def __init__(self, config) -> None:
        self.config = config
        self.files: RunFiles | None = None
        self.started = time.time()
        self.done = self.correct = 0
        self.summary: dict | None = None

    def pytest_runtest_logreport(self, report) -> None:
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == _KEY:
                self.add(json.loads(value))

    def open(self) -> RunFiles:
        """The out dir, emptied unless resuming (at session start when the benchmark is requested)."""
        if self.files is None:
            cfg = run_config(self.config)
            self.files = RunFiles(Path(cfg.results_dir), resume=cfg.resume)
        return self.files

    def pytest_sessionstart(self) -> None:
        if _bench_requested(self.config):
            self.open()

    def add(self, payload: dict) -> None:
        self.open().append(payload["prediction"], payload["result"], payload.get("trace"))
        self.done += 1
        self.correct += bool(payload["result"]["correct"])
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter and self.done % 25 == 0:
            reporter.write_line(f"apibank: {self.done} instances done, running accuracy "
                                f"{self.correct / self.done:.1%}")

    def pytest_sessionfinish(self) -> None:
        if self.files is not None:
            cfg = run_config(self.config)
            self.summary = self.files.finalize(selected_ids(self.config), config=_run_metadata(cfg),
                                               wall_time_s=time.time() - self.started)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.summary:
            _print_table(terminalreporter, run_config(self.config), self.summary)


def _run_metadata(cfg: settings.RunConfig) -> dict:
    from .provenance import provenance

    return {"run": cfg.to_dict(), **provenance(cfg)}


def pytest_configure(config):
    if not _is_worker(config):
        config.pluginmanager.register(_Writer(config), "apibank-writer")


def _print_table(terminalreporter, cfg: settings.RunConfig, summary: dict) -> None:
    model = summary["config"].get("model", {}).get("model", "?")
    label = "gold calls (harness self-check, no model)" if cfg.is_gold else f"{cfg.topology} / {model}"
    terminalreporter.section(f"API-Bank: {label}")
    terminalreporter.write_line(f"{'level':<8}{'correct':>9}{'total':>7}{'accuracy':>10}")
    for level, row in summary["by_level"].items():
        terminalreporter.write_line(f"{level:<8}{row['correct']:>9}{row['total']:>7}{row['accuracy']:>10.1%}")
    terminalreporter.write_line(f"{'overall':<8}{summary['correct']:>9}{summary['total']:>7}{summary['accuracy']:>10.1%}")
    failures = ", ".join(f"{stage} {count}" for stage, count in summary["failures_by_stage"].items())
    terminalreporter.write_line(f"failures by stage: {failures}")
    terminalreporter.write_line(f"results: {Path(cfg.results_dir).resolve()}")
