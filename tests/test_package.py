"""The benchmark as a package: its module found by `--pyargs` from any folder, a session recognised as a
benchmark run because it collects that module (never because of where a file lies), and a project's own
test sessions left alone by the plugin. (The built wheel in a fresh virtualenv: scripts/check-wheel, in CI.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from apibank_bench.core.paths import LOCK_FILE, MANIFEST_DIR, PACKAGED_ROOT, PROJECT_ROOT, require_root

from helpers import EVAL_IDS

#: Our plugins, as pytest names them: blocking them is the session of an environment without the package.
PLUGINS = ("apibank_bench.plugin", "apibank_bench.reports.gate_plugin")


def pytest_in(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """pytest in `folder` (not the checkout: no conftest, no ini of ours), the plugins by entry point."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                           *args], cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def cases(done: subprocess.CompletedProcess) -> list[str]:
    return [line.split("[", 1)[1][:-1] for line in done.stdout.splitlines() if "::test_apibank[" in line]


def test_the_package_carries_its_data_manifests_and_lock():
    assert require_root(None) == PACKAGED_ROOT.resolve()
    assert PACKAGED_ROOT.is_relative_to(PROJECT_ROOT / "apibank_bench")
    lock = json.loads(LOCK_FILE.read_text(encoding="utf-8"))
    assert all((PACKAGED_ROOT / entry["path"]).is_file() for entry in lock["files"]) and len(lock["files"]) == 284
    assert (PACKAGED_ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert "483554eae102996f5ec1f4feab4e78ef29c2a394" in (PACKAGED_ROOT / "NOTICE").read_text()
    assert json.loads((MANIFEST_DIR / "apibank_eval_ids.json").read_text(encoding="utf-8"))["ids"] == EVAL_IDS


def test_pyargs_runs_the_benchmark_from_another_folder(tmp_path):
    done = pytest_in(tmp_path, "--pyargs", "apibank_bench.bench", "--collect-only", "-q", "--apibank-model", "gold",
                     "-k", "level3", "--apibank-out-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert cases(done) == [case for case in EVAL_IDS if case.startswith("level-3::")] and len(cases(done)) == 34
    marked = pytest_in(tmp_path, "--pyargs", "apibank_bench.bench", "--collect-only", "-q", "--apibank-model", "gold",
                       "-m", "level3", "-W", "error::pytest.PytestUnknownMarkWarning")  # the plugin declares the marks
    assert cases(marked) == cases(done), marked.stdout[-2000:] + marked.stderr[-2000:]

    run = pytest_in(tmp_path, "--pyargs", "apibank_bench.bench", "-q", "--apibank-model", "gold", "--apibank-limit",
                    "3")
    assert run.returncode == 0, run.stdout[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "results/apibank/gold/results.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == EVAL_IDS[:3] and all(row["correct"] for row in rows)  # under the cwd


def test_a_thin_module_anywhere_makes_a_benchmark_run(tmp_path):
    """A project's own module that imports the benchmark's (as bench_tests/ does) is the benchmark: the run is
    set up (its folder checked, its rows written), wherever the module lies."""
    suite = tmp_path / "my_ci"
    suite.mkdir()
    (suite / "test_api_bank.py").write_text("from apibank_bench.bench.test_apibank import test_apibank  # noqa\n")
    assert cases(pytest_in(tmp_path, "my_ci", "--co", "-q", "--apibank-model", "gold", "--apibank-limit", "2")) \
        == EVAL_IDS[:2]
    done = pytest_in(tmp_path, "my_ci", "-q", "--apibank-model", "gold", "--apibank-limit", "2")
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "results/apibank/gold/summary.json").is_file()


def test_a_projects_own_tests_are_left_alone(tmp_path):
    """An unrelated project's session gets no benchmark run: no option is required, nothing is written, and a
    test file that merely names the module is not the benchmark."""
    (tmp_path / "test_mine.py").write_text('NAME = "apibank_bench.bench"\n\ndef test_one():\n'
                                           '    assert NAME.rsplit(".", 1)[-1] == "bench"\n')
    done = pytest_in(tmp_path, "-q", env={"APIBANK_MODEL": "no-such-model", "APIBANK_BASE_URL": "http://127.0.0.1:9"})
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (tmp_path / "results").exists()
    # The same session as a benchmark run would refuse that endpoint (the settings are read, the run set up).
    (tmp_path / "test_bench.py").write_text("from apibank_bench.bench.test_apibank import test_apibank  # noqa\n")
    refused = pytest_in(tmp_path, "-q", "test_bench.py",
                        env={"APIBANK_MODEL": "no-such-model", "APIBANK_BASE_URL": "http://127.0.0.1:9"})
    assert refused.returncode != 0


def test_a_benchmark_case_in_a_session_not_started_as_one_says_why(tmp_path):
    """A benchmark module reached by a way the arguments do not show (here: a conftest that imports it by
    another name) is refused in one line, not left to fail on a missing fixture."""
    (tmp_path / "test_hidden.py").write_text(
        "import importlib\ntest_apibank = importlib.import_module('apibank_bench.bench.test_apibank').test_apibank\n")
    done = pytest_in(tmp_path, "-q", "--co", "test_hidden.py")
    assert done.returncode != 0
    assert "was not started as a benchmark run" in done.stdout + done.stderr


def test_a_child_interpreter_is_pointed_at_the_folder_the_package_is_imported_from(tmp_path, monkeypatch):
    """A sweep's cells and a Slurm job's setup put first on the path the folder `apibank_bench` is imported from, as
    the package itself says (`core.paths.import_root`): in site-packages for an installed wheel, not a folder
    counted up from a module's place in a checkout."""
    from types import SimpleNamespace

    import apibank_bench
    from apibank_bench.core.paths import import_root
    from apibank_bench.sweeps.executors.slurm import sbatch_parameters

    assert (import_root() / "apibank_bench" / "__init__.py").resolve() == Path(apibank_bench.__file__).resolve()
    site = tmp_path / "site-packages"
    monkeypatch.setattr(apibank_bench, "__file__", str(site / "apibank_bench" / "__init__.py"))  # as installed
    assert import_root() == site.resolve()
    options = SimpleNamespace(slurm_partition=None, slurm_time=None, slurm_gpus=None, slurm_cpus=None,
                              slurm_mem=None, slurm_max_running=None, slurm_setup=None, slurm_sbatch={})
    assert sbatch_parameters(options)["setup"][0].startswith(f"export PYTHONPATH={site.resolve()}")
