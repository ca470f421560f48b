"""The public Python API (apibank_bench/__init__.py, docs/api.md): every example on its page runs as
written, in a fresh process in an empty folder, against the gold model and a local stand-in endpoint;
`import apibank_bench` imports nothing else; the names it exports are the API module's."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import apibank_bench
from apibank_bench import api
from apibank_bench.core.paths import PROJECT_ROOT
from openai_stub import OpenAIStub
from helpers import mixed

PAGE = PROJECT_ROOT / "docs" / "api.md"
EXAMPLES = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)
ENDPOINT = "http://localhost:8000/v1"  #: the page's endpoint, replaced by the stand-in's URL


def python(code: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})})


def test_the_page_shows_each_part_of_the_api():
    assert len(EXAMPLES) == 5
    text = PAGE.read_text(encoding="utf-8")
    assert all(f"`{name}" in text for name in api.__all__)  # each exported name is on the page
    for call in ("apibank_bench.run(", "apibank_bench.read_results(", "apibank_bench.compare(",
                 "apibank_bench.score_answers("):
        assert any(call in example for example in EXAMPLES), call
    assert "may change without notice" in text


def test_every_example_on_the_page_runs(tmp_path):
    env = {"APIBANK_CACHE_DIR": str(tmp_path / "cache")}
    work = tmp_path / "work"  # one folder for the page's examples, in order: later ones read earlier runs
    work.mkdir()
    with OpenAIStub(default=mixed) as stub:
        for number, example in enumerate(EXAMPLES, 1):
            done = python(example.replace(ENDPOINT, stub.url), work, env)
            assert done.returncode == 0, f"example {number} of docs/api.md:\n{example}\n{done.stderr[-3000:]}"
        requests = len(stub.chat_requests)
    assert requests == 6  # the endpoint example asked the stand-in, once per instance
    assert sorted(path.name for path in (work / "runs").iterdir()) == ["gold", "mine", "rescored"]


def test_importing_the_package_imports_nothing_else(tmp_path):
    done = python("import sys, apibank_bench\n"
                  "print(sorted(name for name in sys.modules if name.startswith('apibank_bench')))\n"
                  "apibank_bench.read_results\n"
                  "print('apibank_bench.api' in sys.modules, 'apibank_bench.llm' in sys.modules)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['apibank_bench']", "True False"]  # a name loads the API, not the model layer


def test_the_package_exports_the_api_modules_names():
    assert sorted(set(apibank_bench.__all__) - {"__version__"}) == sorted(api.__all__)
    for name in api.__all__:
        assert getattr(apibank_bench, name) is getattr(api, name)
    assert set(api.__all__) <= set(dir(apibank_bench))
    with pytest.raises(AttributeError, match="no attribute 'BenchmarkRun'"):
        apibank_bench.BenchmarkRun  # noqa: B018 - an internal name is not exported


def test_run_refuses_a_setting_that_does_not_exist():
    with pytest.raises(ValueError, match="no such setting: modle"):
        apibank_bench.run_config(modle="gold")
    with pytest.raises(ValueError, match="compare the run's folder with the baseline"):  # never ignored
        apibank_bench.run(model="gold", baseline="results/apibank/gold")
    with pytest.raises(TypeError, match="not both"):
        apibank_bench.run(apibank_bench.run_config(model="gold"), limit=2)
