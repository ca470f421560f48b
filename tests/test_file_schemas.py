"""Every result file names its `schema_version` and validates against the JSON Schema shipped in the
package; the shipped schemas are what the models generate; a file of a version this release does not
read is refused by name; a folder written before versions still reads (runs.versions)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from apibank_bench.core import settings
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.runs import versions
from apibank_bench.runs.benchmark_run import BenchmarkRun
from apibank_bench.runs.folder import stored_settings
from apibank_bench.runs.results import read_rows, read_summary, score_predictions_file
from apibank_bench.runs.schemas import FILE_NAMES, SCHEMA_DIR, main, schema_texts
from apibank_bench.runs.summary import read_traces
from apibank_bench.runs.versions import UnsupportedSchemaVersion
from openai_stub import OpenAIStub
from helpers import mixed

FILES = {versions.RESULTS_ROW: "results.jsonl", versions.PREDICTION_LINE: "predictions.jsonl",
         versions.SUMMARY: "summary.json", versions.RUN_RECORD: "run.json", versions.TRACE: "traces"}


def shipped(kind: str) -> dict:
    return json.loads((SCHEMA_DIR / FILE_NAMES[kind]).read_text(encoding="utf-8"))


def strict(schema: dict) -> dict:
    """`schema` with no key allowed that its models do not declare (a cut string's `<key>_truncated` note
    aside): what a file this release writes must meet. The shipped schemas allow more keys, so a reader
    of version 1 reads a file a later release added a field to."""
    schema = copy.deepcopy(schema)
    for part in [schema, *schema.get("$defs", {}).values()]:
        if "properties" in part:
            part["additionalProperties"] = False
            part["patternProperties"] = {"_truncated$": {"$ref": "#/$defs/Truncated"} if "Truncated" in
                                         schema.get("$defs", {}) else {"type": "object"}}
    return schema


def check(data: dict, kind: str) -> None:
    jsonschema.validate(data, shipped(kind))
    jsonschema.validate(data, strict(shipped(kind)))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def headless(out_dir: Path, **given) -> BenchmarkRun:
    run = BenchmarkRun(settings.from_environment(out_dir=str(out_dir), **given))
    run.open_folder()
    run.solve()
    return run


@pytest.fixture(scope="module")
def gold(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gold") / "run"
    headless(folder, model="gold", limit=3)
    return folder


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Path:
    """A voting team against a scripted endpoint: rows with agents scored, traces with turns and a vote."""
    folder = tmp_path_factory.mktemp("team") / "run"
    with OpenAIStub(default=mixed) as stub:
        headless(folder, base_url=[stub.url], model="stub-model", topology="independent", team_size=2, limit=4,
                 cache=False)
    return folder


def every_file(folder: Path) -> list[tuple[str, dict]]:
    found = [(kind, line) for kind in (versions.RESULTS_ROW, versions.PREDICTION_LINE)
             for line in lines(folder / FILES[kind])]
    found += [(kind, json.loads((folder / FILES[kind]).read_text())) for kind in (versions.SUMMARY, versions.RUN_RECORD)]
    return found + [(versions.TRACE, json.loads(path.read_text())) for path in sorted((folder / "traces").iterdir())]


def test_the_shipped_schemas_are_what_the_models_generate():
    assert sorted(path.name for path in SCHEMA_DIR.iterdir()) == sorted(FILE_NAMES.values())
    assert {name: (SCHEMA_DIR / name).read_text(encoding="utf-8") for name in FILE_NAMES.values()} == schema_texts()
    for kind in versions.KINDS:
        jsonschema.Draft202012Validator.check_schema(shipped(kind))


def test_the_check_command_names_a_schema_that_drifted_and_the_command_rewrites_it(tmp_path, capsys):
    shutil.copytree(SCHEMA_DIR, tmp_path, dirs_exist_ok=True)
    assert main(["--check", "--out", str(tmp_path)]) == 0
    drifted = tmp_path / FILE_NAMES[versions.SUMMARY]
    drifted.write_text(drifted.read_text().replace('"accuracy"', '"acc"'))
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert f"differs: {drifted}" in capsys.readouterr().out
    assert main(["--out", str(tmp_path)]) == 0 and main(["--check", "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize("run", ["gold", "team"])
def test_every_file_names_its_version_and_validates_against_its_shipped_schema(run, request):
    folder = request.getfixturevalue(run)
    found = every_file(folder)
    assert {kind for kind, _ in found} == set(versions.KINDS)
    for kind, data in found:
        assert data["schema_version"] == versions.WRITES[kind] == 1, kind
        check(data, kind)
    if run == "team":  # the parts a team writes were there to validate
        traces = [data for kind, data in found if kind == versions.TRACE]
        assert all(len(trace["agents"]) == 2 and trace["vote"]["rule"] for trace in traces)
        assert all(data.get("agents_correct") for kind, data in found if kind == versions.RESULTS_ROW)
        assert read_summary(folder)["team"]


def test_the_schemas_refuse_what_the_models_do_not_say(gold):
    summary = json.loads((gold / "summary.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        check({**summary, "accuracy": "high"}, versions.SUMMARY)
    with pytest.raises(jsonschema.ValidationError, match="schema_version"):
        check({**summary, "schema_version": 2}, versions.SUMMARY)
    with pytest.raises(jsonschema.ValidationError):  # a field no model declares
        check({**summary, "undeclared": 1}, versions.SUMMARY)
    row = lines(gold / "results.jsonl")[0]
    with pytest.raises(jsonschema.ValidationError):
        check({**row, "stage": "guessed"}, versions.RESULTS_ROW)
    with pytest.raises(jsonschema.ValidationError, match="schema_version"):
        check({key: value for key, value in row.items() if key != "schema_version"}, versions.RESULTS_ROW)


def test_the_docs_validation_example_validates_a_runs_summary(gold, tmp_path):
    """docs/schemas.md's example, run as written with the gold run's folder for the page's."""
    page = (PROJECT_ROOT / "docs" / "schemas.md").read_text(encoding="utf-8")
    [example] = [block.split("```", 1)[0] for block in page.split("```python\n")[1:]]
    assert "results/apibank/gold" in example
    (tmp_path / "results" / "apibank").mkdir(parents=True)
    shutil.copytree(gold, tmp_path / "results" / "apibank" / "gold")
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    summary = tmp_path / "results" / "apibank" / "gold" / "summary.json"
    summary.write_text(summary.read_text().replace('"schema_version": 1', '"schema_version": 2'))
    refused = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=tmp_path,
                             timeout=300, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert refused.returncode != 0 and "ValidationError" in refused.stderr  # the example does validate


def _set_version(folder: Path, kind: str, version) -> Path:
    """Give one file of `folder` (its first line, or one trace) another schema_version; returns the file."""
    path = folder / FILES[kind]
    if kind == versions.TRACE:
        path = sorted(path.iterdir())[0]
    if kind in (versions.RESULTS_ROW, versions.PREDICTION_LINE):
        first, *rest = lines(path)
        path.write_text("".join(json.dumps(line) + "\n" for line in [{**first, "schema_version": version}, *rest]))
    else:
        path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": version}))
    return path


READERS = {
    versions.RESULTS_ROW: read_rows,
    versions.SUMMARY: read_summary,
    versions.RUN_RECORD: stored_settings,
    versions.TRACE: lambda folder: read_traces(folder / "traces"),
    versions.PREDICTION_LINE: lambda folder: score_predictions_file(folder / "predictions.jsonl", folder / "scored"),
}


@pytest.mark.parametrize("version", [2, "1", None, True])
@pytest.mark.parametrize("kind", versions.KINDS)
def test_a_file_of_a_version_this_release_does_not_read_is_refused_by_name(kind, version, gold, tmp_path):
    folder = tmp_path / "newer"
    shutil.copytree(gold, folder)
    path = _set_version(folder, kind, version)
    with pytest.raises(UnsupportedSchemaVersion) as refused:
        READERS[kind](folder)
    message = str(refused.value)
    assert str(path) in message and f"schema_version {version!r} of {kind}" in message
    assert "reads versions 1," in message and "without schema_version" in message


def test_a_command_refuses_a_newer_folder_in_one_line_naming_it(gold, tmp_path):
    folder = tmp_path / "newer"
    shutil.copytree(gold, folder)
    path = _set_version(folder, versions.RESULTS_ROW, 7)
    done = subprocess.run([sys.executable, "-m", "apibank_bench", "compare", str(gold), str(folder)],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(path) in done.stderr and "schema_version 7" in done.stderr
    with pytest.raises(UnsupportedSchemaVersion):  # a run continuing the folder refuses it before it runs
        headless(folder, model="gold", limit=4, resume=True)


def _unversioned(folder: Path) -> None:
    """Strip `schema_version` from every file: the folder as apibank-bench wrote it before versions."""
    for kind in (versions.RESULTS_ROW, versions.PREDICTION_LINE):
        path = folder / FILES[kind]
        path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "schema_version"}) + "\n"
                                for line in lines(path)))
    for path in [folder / "summary.json", folder / "run.json", *(folder / "traces").iterdir()]:
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "schema_version"}))


def test_a_folder_written_before_versions_reads_as_version_1_and_a_run_continues_it(gold, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(gold, old)
    _unversioned(old)
    assert "schema_version" not in (old / "results.jsonl").read_text() + (old / "summary.json").read_text()
    assert read_rows(old) == read_rows(gold)  # the same rows (a row's version is 1 when the line has none)
    assert read_summary(old) == {k: v for k, v in read_summary(gold).items() if k != "schema_version"}
    assert stored_settings(old) == stored_settings(gold) and len(read_traces(old / "traces")) == 3
    before = (old / "results.jsonl").read_text()

    run = headless(old, model="gold", limit=4, resume=True)
    assert run.outcome.summary["total"] == 4 and run.outcome.summary["correct"] == 4
    rows = lines(old / "results.jsonl")
    assert rows[:3] == [json.loads(line) for line in before.splitlines()]  # the old lines as they were
    assert [row.get("schema_version") for row in rows] == [None, None, None, 1]  # each line names its own form
    assert json.loads((old / "summary.json").read_text())["schema_version"] == 1
