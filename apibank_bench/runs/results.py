"""Result files of a run: `predictions.jsonl`, `results.jsonl`, `traces/`, `summary.json` (and `run.json`:
runs.folder). Each is written and read here, in its typed model (runs.row, runs.file_models) and with
its `schema_version` (runs.versions).

Lines are appended the moment an instance finishes (an interrupted run keeps
everything it did) and the files are put back in manifest order, without
duplicates, when the run ends or is resumed (those rewrites are synced to disk). An appended line is in
the OS's hands at once (a killed run loses none) and is synced to disk with the next line appended
`SYNC_EVERY_S` or more after the last sync (an fsync per line cost a 100-instance run 1.7 s of its main
thread on a busy disk); a line the machine's crash loses is an instance a resumed run solves again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from apibank_bench.core.files import write_atomic
from apibank_bench.core.text import SURROGATES
from apibank_bench.runs import versions
from apibank_bench.runs.epochs import row_key, split_case
from apibank_bench.runs.file_models import PredictionLine, RunRecord, Trace
from apibank_bench.runs.row import ResultRow
from apibank_bench.scoring.scorer import Score, Scorer
from apibank_bench.scoring.stage import Reason, Stage
from apibank_bench.data.tasks import Task, get_task

RESULTS = "results.jsonl"
PREDICTIONS = "predictions.jsonl"
SUMMARY = "summary.json"
TRACES = "traces"
RECORD = "run.json"  #: the settings of the folder's run (runs.folder)


SYNC_EVERY_S = 1.0  #: appended lines are synced to disk at most this long after they were written
MAX_STORED_CHARS = 64 * 1024  #: longer strings are stored cut, with their length and hash


def to_json(value: Any) -> str:
    """One line of JSON that can always be written as UTF-8.

    A model may return a lone surrogate (`"\\ud800"` is a legal JSON escape) that
    UTF-8 cannot encode; such characters are written as `\\uXXXX` escapes, which
    read back as the same string.
    """
    # Parsed arguments may hold sets or tuples (any Python literal parses); keep them readable.
    text = json.dumps(value, ensure_ascii=False, default=lambda obj: sorted(obj, key=repr)
                      if isinstance(obj, (set, frozenset)) else str(obj))
    # Outside strings JSON is ASCII, so every surrogate here sits inside a string literal.
    return SURROGATES.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def cap_strings(value: Any, limit: int = MAX_STORED_CHARS) -> Any:
    """`value` with every string longer than `limit` cut to `limit` characters.

    Beside a cut string in a dict, key `<key>_truncated` holds its full `length`
    and `sha256` (of its UTF-8 bytes); for strings inside a list that note is a
    dict from the string's index. Scoring has already seen the whole text.
    """
    return _cap(value, limit)[0]


def capped_json(value: Any, limit: int = MAX_STORED_CHARS) -> str:
    """`to_json(cap_strings(value))`, without walking `value` when its JSON is `limit` characters or
    fewer: no string in it can be longer then (a string's JSON is at least as long as the string).
    Traces are JSON of hundreds of strings, and walking each twice cost a debate run about 0.1 s of CPU."""
    text = to_json(value)
    return text if len(text) <= limit else to_json(cap_strings(value, limit))


def _cap(value: Any, limit: int) -> tuple[Any, Any]:
    """(capped value, note on what was cut or None)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value, None
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        return value[:limit], {"length": len(value), "sha256": digest}
    if isinstance(value, dict):
        capped = {}
        for key, item in value.items():
            capped[key], note = _cap(item, limit)
            if note is not None:
                capped[f"{key}_truncated"] = note
        return capped, None
    if isinstance(value, (list, tuple)):
        pairs = [_cap(item, limit) for item in value]
        notes = {str(index): note for index, (_, note) in enumerate(pairs) if note is not None}
        return [item for item, _ in pairs], notes or None
    return value, None


def records(task: Task, answer: str | None, score: Score, epoch: int = 0,
            **solved: Any) -> tuple[PredictionLine, ResultRow]:
    """The predictions.jsonl line and the results row of one instance and epoch, long strings capped.

    `solved`: the row's optional fields (what solving took, a team's agents scored); one given as
    None is written as null (runs.row)."""
    prediction: PredictionLine = {"id": task.combined_id, "epoch": epoch, "prediction": answer,
                                  "predicted_call": score.predicted_call,
                                  "schema_version": versions.WRITES[versions.PREDICTION_LINE]}
    row = ResultRow(task.combined_id, epoch, task.level, score.correct, score.stage, score.error, score.predicted_call,
                    task.gold_call, score.reason, **solved, nulls=frozenset(name for name, value in solved.items() if value is None))
    return cap_strings(prediction), ResultRow.from_json(cap_strings(row.to_json()))  # a cut string's note beside it


class RunFiles:
    """The out dir of one run. Only one process (the pytest controller) writes it."""

    def __init__(self, out_dir: Path, resume: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self._lock = threading.Lock()
        if not resume:
            for name in (RESULTS, PREDICTIONS, SUMMARY, RECORD, RESULTS + UNREADABLE, PREDICTIONS + UNREADABLE):
                (self.out_dir / name).unlink(missing_ok=True)
            traces = self.out_dir / TRACES
            if traces.is_dir():
                for path in traces.glob("*.json"):
                    path.unlink()
        self._sync_due = 0.0  #: when appended lines are next synced to disk (the first at once)
        self.set_aside: list[str] = []  #: unreadable lines moved to `<file>.unreadable`: "results.jsonl line 7"
        if resume:  # lines appended next must not join a torn one, and no unreadable line may vanish
            self._set_aside()
        (self.out_dir / TRACES).mkdir(parents=True, exist_ok=True)

    def _set_aside(self) -> None:
        for name in (RESULTS, PREDICTIONS):
            self.set_aside += [f"{name} line {number}" for number in set_aside_unreadable(self.out_dir / name)]

    def append(self, prediction: PredictionLine | dict, row: ResultRow, trace: Trace | dict | None = None) -> None:
        with self._lock:
            sync = time.monotonic() >= self._sync_due  # (the lines appended since the last sync go with it)
            for name, line in ((PREDICTIONS, prediction), (RESULTS, row.to_json())):
                with open(self.out_dir / name, "a", encoding="utf-8") as handle:
                    handle.write(capped_json(line) + "\n")
                    handle.flush()
                    if sync:
                        os.fsync(handle.fileno())
            if sync:
                self._sync_due = time.monotonic() + SYNC_EVERY_S
            if trace is not None:  # not synced: the machine's crash could leave a trace empty, never a row wrong
                write_atomic(self.out_dir / TRACES / trace_name(*row.key), capped_json(trace), sync=False)

    def finalize(self, order: Iterable[str], config: dict | None = None, wall_time_s: float | None = None,
                 deselected: Iterable[str] = (), extra: dict | None = None) -> dict:
        """Sort both JSONL files into run order (`order`: case IDs, runs.epochs; the last line per
        instance and epoch wins) and write summary.json.

        `deselected`: cases of `order` that pytest was told not to run (they are not "not run");
        `extra`: more fields for summary.json."""
        with self._lock:
            self._set_aside()  # before the files are rewritten in order: their unreadable lines are kept
            keys = [split_case(case) for case in order]
            for name in (PREDICTIONS, RESULTS):
                put_in_order(self.out_dir / name, keys)
            wanted = set(keys)
            rows = [row for row in read_rows(self.out_dir) if row.key in wanted]
            have = {row.key for row in rows}
            left_out = {split_case(case) for case in deselected}
            not_run = sum(1 for key in keys if key not in have and key not in left_out)
            unheld = sum(1 for key in keys if key not in have and key in left_out)
            summary = summarize(rows, config, wall_time_s, selected=len(keys), trace_dir=self.out_dir / TRACES,
                                not_run=not_run, without_row=not_run + unheld)
            summary["unreadable_lines"] = unreadable_count(self.out_dir)
            summary.update(extra or {})
            if "selection" in summary or unheld:  # deselected cases the folder holds no row of (`complete` says so)
                summary["selection"] = {**(summary.get("selection") or {}), "deselected_without_row": unheld}
            return write_summary(self.out_dir, summary)


def trace_name(task_id: str, epoch: int = 0) -> str:
    """A file name for a task ID (IDs contain `::`) and epoch (epoch 0 keeps the plain name)."""
    return task_id.replace("::", "__").replace("/", "_") + (f"__epoch{epoch}" if epoch else "") + ".json"


def finished_ids(out_dir: Path) -> set[str]:
    """Instances with a scored answer; an errored one is not finished (a resumed run tries it again)."""
    return {row.id for row in read_rows(out_dir) if not row.is_error}


def finished_keys(out_dir: Path) -> set[tuple[str, int]]:
    """(instance, epoch) pairs with a scored answer (ResultRow.key)."""
    return {row.key for row in read_rows(out_dir) if not row.is_error}


def read_rows(out_dir: Path) -> list[ResultRow]:
    """A results folder's rows (none where it has no results.jsonl; an unreadable line is not a row:
    see `unreadable_lines`). A row of a version this release does not read is refused, naming the file
    (runs.versions.UnsupportedSchemaVersion)."""
    path = Path(out_dir) / RESULTS
    return [ResultRow.from_json(line, f"{path} (the row of {line.get('id')!r})") for line in read_jsonl(path)]


def read_summary(out_dir: Path) -> dict | None:
    """A results folder's summary.json, None where there is none (ValueError if it is not JSON or of a
    version this release does not read). Its fields: runs.file_models.Summary."""
    path = Path(out_dir) / SUMMARY
    return versions.read_json_file(path, versions.SUMMARY) if path.is_file() else None


def write_summary(out_dir: Path, summary: dict) -> dict:
    """Write summary.json (runs.file_models.Summary, with its `schema_version` the first key); returns what
    was written."""
    written = versions.stamped(summary, versions.SUMMARY)
    write_atomic(Path(out_dir) / SUMMARY, json.dumps(written, indent=1, ensure_ascii=False))
    return written


def read_record(out_dir: Path) -> dict | None:
    """A results folder's run.json, None where there is none (ValueError if it is not JSON or of a
    version this release does not read). Its fields: runs.file_models.RunRecord."""
    path = Path(out_dir) / RECORD
    return versions.read_json_file(path, versions.RUN_RECORD) if path.is_file() else None


def write_record_file(out_dir: Path, record: RunRecord | dict) -> dict:
    """Write run.json (runs.file_models.RunRecord, with its `schema_version` the first key); returns what
    was written."""
    written = versions.stamped(dict(record), versions.RUN_RECORD)
    write_atomic(Path(out_dir) / RECORD, json.dumps(written, indent=1, ensure_ascii=False))
    return written


def read_trace(path: Path) -> dict:
    """One trace file (ValueError if it is not JSON or of a version this release does not read). Its fields:
    runs.file_models.Trace."""
    return versions.read_json_file(path, versions.TRACE)


def read_jsonl(path: Path) -> list[dict]:
    """Lines of a JSONL file. An unreadable line (a killed writer's fragment, a corrupted line) is not
    read: `unreadable_lines` names it, and a writer sets it aside (`set_aside_unreadable`), never drops it."""
    if not Path(path).is_file():
        return []
    lines = []
    with open(path, "rb") as handle:
        for raw in handle:
            try:  # a writer killed mid-character leaves bytes that are not UTF-8
                lines.append(json.loads(raw.decode("utf-8")))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
    return lines


UNREADABLE = ".unreadable"  #: `results.jsonl.unreadable`: the bytes of lines that could not be read


def unreadable_lines(path: Path) -> list[int]:
    """The numbers (from 1) of a JSONL file's lines that are not JSON (a half-written or corrupted line)."""
    path = Path(path)
    if not path.is_file():
        return []
    return [number for number, line in enumerate(path.read_bytes().splitlines(keepends=True), 1)
            if line.strip() and not _is_json(line)]


def unreadable_count(out_dir: Path, name: str = RESULTS) -> int:
    """Lines of a folder's file that could not be read: set aside before, or still in it."""
    aside = Path(out_dir) / (name + UNREADABLE)
    kept = len(aside.read_bytes().splitlines()) if aside.is_file() else 0
    return kept + len(unreadable_lines(Path(out_dir) / name))


def set_aside_unreadable(path: Path) -> list[int]:
    """Move a JSONL file's unreadable lines, byte for byte, to `<path>.unreadable` (appended, one per line;
    never deleted), and end the file with a newline so a line appended next joins no fragment.

    Returns the numbers of the lines moved. A writer killed mid-line leaves such a fragment at the end."""
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    bad = [number for number, line in enumerate(lines, 1) if line.strip() and not _is_json(line)]
    if not bad and (not data or data.endswith(b"\n")):
        return []
    if bad:
        with open(path.with_name(path.name + UNREADABLE), "ab") as handle:
            handle.write(b"".join(lines[number - 1].rstrip(b"\r\n") + b"\n" for number in bad))
            handle.flush()
            os.fsync(handle.fileno())
    moved = set(bad)
    write_atomic(path, b"".join(line if line.endswith(b"\n") else line + b"\n"
                                for number, line in enumerate(lines, 1) if number not in moved))
    return bad


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return True


def put_in_order(path: Path, order: list[tuple[str, int]]) -> None:
    """Rewrite a JSONL file in the order of its (instance, epoch) keys, one line per key."""
    lines = {row_key(line): line for line in read_jsonl(path)}
    rank = {key: index for index, key in enumerate(order)}
    ordered = sorted(lines.values(), key=lambda line: (rank.get(row_key(line), len(rank)), row_key(line)))
    if path.exists() or ordered:
        write_atomic(path, "".join(to_json(line) + "\n" for line in ordered))


def summarize(rows: list[ResultRow], config: dict | None = None, wall_time_s: float | None = None,
              selected: int | None = None, trace_dir: Path | None = None, not_run: int | None = None,
              without_row: int | None = None) -> dict:
    """summary.json (see summary.summarize_rows). `selected` counts cases (an instance and epoch: runs.epochs);
    `not_run`: selected cases with no line at all (default: all of them), less those deselected on purpose;
    `without_row`: selected cases with no line, deselected or not (default: `not_run`). The folder is
    `complete` only when it holds a finished row for every selected case: a case pytest deselected
    (`-k`) is not "not run", but a folder without its row does not hold the whole selection."""
    from apibank_bench.runs.summary import read_traces, summarize_rows

    traces = read_traces(trace_dir)
    summary = summarize_rows(rows, traces)
    if traces:
        from apibank_bench.runs.cost import cost_summary, price_table

        run = (config or {}).get("run") or {}
        try:
            summary["cost"] = cost_summary(traces, price_table(run.get("price") or (), run.get("price_file")))
        except ValueError as exc:  # a price file gone bad since the run started: the rest of the summary stands
            summary["cost"] = {"error": str(exc)}
    if selected is not None:
        summary["selected"] = selected
        summary["not_run"] = max(selected - len(rows), 0) if not_run is None else not_run
    missing = summary.get("not_run") if without_row is None else without_row
    summary["complete"] = not summary["errors"] and not missing
    if wall_time_s is not None:
        summary["wall_time_s"] = round(wall_time_s, 3)
    if config:
        summary["config"] = config
    return summary


def score_predictions_file(predictions: Path, out_dir: Path, level: str | None = None,
                           toolsearcher_scorer: str | None = None, root=None) -> dict:
    """`apibank-bench score`: score saved raw answers into out_dir/results.jsonl."""
    scorer = Scorer(root, toolsearcher_scorer)
    files = RunFiles(out_dir)
    order = []
    for line in read_jsonl(predictions):
        versions.read_version(line, versions.PREDICTION_LINE, str(predictions))
        task = get_task(str(line["id"]), level=level, root=scorer.root)
        answer = line.get("prediction")
        cut = line.get("prediction_truncated")
        score = (Score(False, Stage.ERROR, f"the stored answer was cut to {MAX_STORED_CHARS} characters (of "
                                       f"{cut.get('length')}): the whole answer is not in this file",
                       reason=Reason.ERROR_CUT_ANSWER)
                 if isinstance(cut, dict) else scorer.score(task, answer))
        prediction, row = records(task, answer, score)
        files.append(prediction, row)
        order.append(task.combined_id)
    return files.finalize(order, config={"source": str(predictions), "toolsearcher_scorer": toolsearcher_scorer})
