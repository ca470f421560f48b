"""One results folder driven through random sequences of what users do (hypothesis's RuleBasedStateMachine):
runs of random selections (--limit, --offset, --only, --shard, -k, --lf, epochs), resumes, an endpoint that
fails some instances, a session killed mid-run, shards merged, a line corrupted, and runs with other
measured settings. After every step the folder is checked against a plain model of what it must hold.

Runs are `apibank-bench run` in this process against a local stand-in endpoint (tests/openai_stub.py), with
small selections; only the kill runs in a subprocess (it must die as under `kill -9`). The number of
examples and steps is bounded so CI stays fast: see SETTINGS.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from apibank_bench.cli import main as cli_main
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.reports.compare import compare, format_table
from apibank_bench.runs.epochs import case_id
from openai_stub import OpenAIStub, Reply
from helpers import EVAL_IDS, task_of, written_rows

TESTS = Path(__file__).resolve().parent
POOL = EVAL_IDS[:10]  #: the instances selections draw from (the stand-in knows the first 40)
FAILING = {POOL[2], POOL[7]}  #: the instances the endpoint fails while it is `failing`
MEASURED = {"model": "stub", "temperature": 0.2}  #: the measured settings every run here shares

#: Bounded for CI; APIBANK_STATEFUL_EXAMPLES runs more (e.g. 200) when hunting.
SETTINGS = settings(max_examples=int(os.environ.get("APIBANK_STATEFUL_EXAMPLES", "6")), stateful_step_count=6,
                    deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)

STEPS: Counter[str] = Counter()  #: the rules run in this process (printed with -s at the end: see the test)

selections = st.fixed_dictionaries({
    "limit": st.one_of(st.none(), st.integers(1, 5)),
    "offset": st.sampled_from([0, 0, 0, 1, 3]),
    "only": st.one_of(st.none(), st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True)),
    "shard": st.sampled_from([None, None, (1, 2), (2, 2)]),
})


def selected(selection: dict, epochs: int) -> list[tuple[str, int]]:
    """The (instance, epoch) cases a selection holds, said plainly (the model's own reading of the flags)."""
    ids = [i for i in EVAL_IDS if i in selection["only"]] if selection["only"] else list(EVAL_IDS)
    ids = ids[selection["offset"]:]
    if selection["limit"] is not None or not selection["only"]:  # no --limit and no --only: run's default 2
        ids = ids[:selection["limit"] or 2]
    cases = [(i, e) for e in range(epochs) for i in ids]
    if selection["shard"]:
        index, count = selection["shard"]
        cases = cases[index - 1::count]
    return cases


def selection_flags(selection: dict) -> list[str]:
    flags = ["--offset", str(selection["offset"])]
    if selection["limit"] is not None:
        flags += ["--limit", str(selection["limit"])]
    if selection["only"]:
        flags += ["--only", *selection["only"]]
    if selection["shard"]:
        flags += ["--shard", "{}/{}".format(*selection["shard"])]
    return flags


def folder_bytes(out: Path) -> dict[str, bytes]:
    return {str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


def node_name(key: tuple[str, int], epochs: int) -> str:
    """The node name of a case, as `-k` matches it."""
    return f"test_apibank[{case_id(key[0], key[1], epochs)}]"


def kind(row: dict) -> str:
    return "error" if row["stage"] == "error" else "correct" if row["correct"] else "wrong"


# -- what the messages print, read back and checked against the rows ------------------------------------


def _percent(correct: int, rows: int) -> str:
    return f"{(correct / rows if rows else 0.0):.1%}"


def _usage(row: dict) -> int | None:
    if row.get("model_calls") == 0:
        return 0
    if not row.get("prompt_tokens") or row.get("completion_tokens") is None:
        return None
    return row["prompt_tokens"] + row["completion_tokens"]


def check_closing(text: str, rows: list[dict], cases: list, deselected: set, epochs: int) -> None:
    """Every number of a closing table against the selection's rows: the overall line, tokens per instance,
    the INCOMPLETE line and the selection line."""
    lines = text.splitlines()
    assert any(line.startswith("=") and " API-Bank: " in line for line in lines), text[-3000:]
    correct = sum(kind(row) == "correct" for row in rows)
    errors = sum(kind(row) == "error" for row in rows)
    instances = {row["id"] for row in rows}
    repeats = len(rows) != len(instances)
    start = max(index for index, line in enumerate(lines) if line.startswith("=") and " API-Bank: " in line)
    header = lines[start + 1]
    assert header.startswith("level ") and ("attempts" in header) == repeats, header
    overall = next(line for line in lines[start:] if line.startswith("overall "))  # (the epochs table's is after)
    numbers = overall.split()
    expected = [str(correct), *([str(len(rows))] if repeats else []), str(len(instances)), str(errors),
                _percent(correct, len(rows))]
    assert numbers[1:len(expected) + 1] == expected, (overall, expected)

    # tokens per instance: an instance's tokens are all its attempts', counted when every one has usage
    used: dict[str, list] = {}
    for row in rows:
        used.setdefault(row["id"], []).append(_usage(row))
    whole = [sum(parts) for parts in used.values() if None not in parts]
    known = [part for parts in used.values() for part in parts if part is not None]
    shown = [line for line in lines if line.startswith("tokens per instance: ")]
    if not whole:
        assert not shown, shown
    else:
        [line] = shown[-1:]
        expect = f"tokens per instance: {sum(whole) / len(whole):.0f}"
        if len(known) > len(whole):
            expect += f" over its epochs ({sum(known) / len(known):.0f} per attempt)"
        missing = sum(None in parts for parts in used.values())
        assert line == expect + (f" (usage missing for {missing} instances)" if missing else ""), (line, expect)

    keys = {(row["id"], row.get("epoch", 0)) for row in rows}
    not_run = sum(key not in keys and key not in deselected for key in cases)
    unheld = sum(key not in keys and key in deselected for key in cases)
    incomplete = [line for line in lines if line.startswith("INCOMPLETE: ")]
    assert bool(incomplete) == bool(errors or not_run), (incomplete, errors, not_run)
    if incomplete:
        unit, row_unit = ("cases", "attempt") if epochs > 1 else ("instances", "instance")
        found = re.match(rf"INCOMPLETE: of the (\d+) selected {unit}(?: \(.*?\))?, (\d+) have a row"
                         rf"(?: and (\d+) have none \((.*?)\))?; (\d+) {row_unit}s? errored\. accuracy ([\d.]+%) "
                         rf"is over the (\d+) {row_unit}s? with a row", incomplete[-1])
        assert found, incomplete[-1]
        assert int(found[1]) == len(cases) and int(found[2]) == len(rows) == int(found[7])
        assert int(found[3] or 0) == not_run + unheld and int(found[5]) == errors
        assert found[6] == _percent(correct, len(rows))
        why = dict((what, int(count)) for count, what in re.findall(r"(\d+) (did not run|deselected by pytest)",
                                                                      found[4] or ""))
        assert why == {what: count for what, count in (("did not run", not_run), ("deselected by pytest", unheld))
                       if count}, (found[4], not_run, unheld)
    selection = [line for line in lines if line.startswith("selection: ")]
    assert bool(selection) == bool(deselected), (selection, deselected)
    if selection:
        found = re.match(r"selection: (\d+) of the (\d+) selected", selection[-1])
        assert found and (int(found[1]), int(found[2])) == (len(deselected), len(cases)), selection[-1]
        assert (f"but {unheld} of them have no row" in selection[-1]) == bool(unheld), (selection[-1], unheld)


def check_merged(text: str, rows: list[dict], cases: list, epochs: int) -> None:
    [line] = [line for line in text.splitlines() if line.startswith("merged ")]
    unit, over = ("cases", "attempts") if epochs > 1 else ("instances", "instances")
    found = re.match(rf"merged 2 folders into .*?: (\d+) of the run's (\d+) selected {unit}(?: \(.*?\))? have a "
                     rf"row, accuracy ([\d.]+%) over the (\d+) {over}$", line)
    correct = sum(kind(row) == "correct" for row in rows)
    assert found, line
    assert (int(found[1]), int(found[2]), found[3], int(found[4])) == (len(rows), len(cases),
                                                                        _percent(correct, len(rows)), len(rows))


class FolderMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="apibank-states-"))
        self.out = self.tmp / "out"
        self.failing = False
        self.stub = OpenAIStub(default=self.respond).__enter__()
        self.epochs = 1
        self.rows: dict[tuple[str, int], str] = {}  #: the model: each case's row kind in the folder
        self.last: tuple[list, set] = ([], set())  #: the last summary's selection, and what pytest deselected
        self.summary_fresh = False  #: summary.json was written by the last session that wrote rows
        self.unreadable = 0  #: lines set aside, or waiting to be
        self.sessions = 0

    def teardown(self) -> None:
        self.stub.__exit__(None, None, None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the stand-in endpoint and what it answers ----------------------------------------------

    def respond(self, body: dict) -> Reply:
        task = task_of(body)
        if self.failing and task.combined_id in FAILING:
            return Reply(status=500)
        right = EVAL_IDS.index(task.combined_id) % 2 == 0
        return Reply(text=f"[{task.gold_call[1:-1]}]" if right else "[NoSuchApi(x='1')]")

    def expected(self, key: tuple[str, int]) -> str:
        if self.failing and key[0] in FAILING:
            return "error"
        return "correct" if EVAL_IDS.index(key[0]) % 2 == 0 else "wrong"

    def run(self, out: Path, *flags: str, pytest_args: tuple[str, ...] = ()) -> int:
        argv = ["run", "--out-dir", str(out), "--model", "stub", "--base-url", self.stub.url, "--no-cache",
                "--max-retries", "0", "--down-after", "0", "--concurrency", "2",
                "--epochs", str(self.epochs), *flags, "--", "-o", f"cache_dir={self.tmp / 'pytest-cache'}",
                *pytest_args]
        self.sessions += 1
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = cli_main(argv)
        self.output = printed.getvalue()
        sys.stdout.write(self.output)  # (shown with the failure)
        return code

    def selection_rows(self, cases: list) -> list[dict]:
        wanted = set(cases)
        return [row for row in written_rows(self.out) if (row["id"], row.get("epoch", 0)) in wanted]

    def printed(self, cases: list, deselected: set = frozenset(), nothing_left: bool = False) -> None:
        """What the session printed agrees with the folder's rows; a resume with nothing left says so. The
        model's reading of the flags (`selected`) is the run's selection: its summary counts the same cases
        and rows."""
        summary = self.summary() or {}
        assert (summary.get("selected"), summary.get("attempts")) == (len(cases), len(self.selection_rows(cases))), \
            (summary.get("selection"), cases)
        STEPS["messages checked"] += 1
        assert ("nothing left to run" in self.output) == nothing_left, self.output[-3000:]
        check_closing(self.output, self.selection_rows(cases), cases, set(deselected), self.epochs)
        self.compared()

    def compared(self) -> None:
        """`compare` with a twin of the folder that holds the same rows but no record of pytest's narrowing: a
        selection differs only where the narrowing left selected cases without a row; with epochs the header
        says the pairing is on epoch 0."""
        twin = self.tmp / "twin"
        shutil.rmtree(twin, ignore_errors=True)
        shutil.copytree(self.out, twin)
        summary = json.loads((twin / "summary.json").read_text())
        narrowed = summary.get("selection") or {}
        summary["selection"] = {key: value for key, value in narrowed.items()
                                if key not in ("pytest", "deselected", "deselected_without_row")}
        (twin / "summary.json").write_text(json.dumps(summary))
        result = compare([twin, self.out], force=True)
        [comparison] = result["comparisons"]
        holds_all = not narrowed.get("deselected_without_row")
        assert holds_all == (not comparison["notes"]), (comparison["notes"], narrowed)
        first = [row for row in written_rows(self.out) if not row.get("epoch")]
        assert comparison["paired"] == sum(kind(row) != "error" for row in first)
        several = any(row.get("epoch") for row in written_rows(self.out))
        assert ("paired on epoch 0 only" in format_table(result)) == several

    def has_results(self) -> bool:
        return bool(written_rows(self.out)) or (self.out / "summary.json").is_file()

    def unfinished(self, cases: list) -> list:
        """The cases of a selection without a scored row in the model (what a `--resume` runs)."""
        finished = {key for key, what in self.rows.items() if what != "error"}
        return [key for key in cases if key not in finished]

    def ran(self, to_run: list, cases: list, deselected: set = frozenset(), resumed: bool = False) -> None:
        """The model after a session that ran `to_run` of the selection `cases` (pytest deselected `deselected`).
        A session that writes no row leaves the summary as it was, but for a `--resume` with nothing left to
        run: it summarizes the folder's rows for its selection."""
        for key in to_run:
            self.rows[key] = self.expected(key)
        if to_run or (resumed and self.has_results()):
            self.last = (cases, set(deselected))
            self.summary_fresh = True

    def session(self, cases: list, *flags: str, pytest_args: tuple[str, ...] = ()) -> int | None:
        """Run into the folder; an empty selection is refused (exit 2) and leaves it as it was."""
        before = folder_bytes(self.out) if self.out.is_dir() else {}
        code = self.run(self.out, *flags, pytest_args=pytest_args)
        if not cases:
            assert code == 2 and (folder_bytes(self.out) if self.out.is_dir() else {}) == before
            return None
        assert code in (0, 1), code
        return code

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: not self.has_results())
    @rule(selection=selections, epochs=st.sampled_from([1, 1, 2]))
    def first_run(self, selection, epochs):
        STEPS['first_run'] += 1
        self.epochs = epochs
        cases = selected(selection, epochs)
        if self.session(cases, *selection_flags(selection)) is not None:
            self.ran(cases, cases)
            self.printed(cases)

    @precondition(lambda self: not self.has_results())
    @rule(selection=selections, epochs=st.sampled_from([1, 2]))
    def shards_merged(self, selection, epochs):
        STEPS['shards_merged'] += 1
        whole = {**selection, "shard": None}
        cases = selected(whole, epochs)
        if len(cases) < 2:
            return
        self.epochs = epochs
        parts = [self.tmp / f"shard{i}" for i in (1, 2)]
        for index, part in enumerate(parts, 1):
            shutil.rmtree(part, ignore_errors=True)
            assert self.run(part, *selection_flags({**whole, "shard": (index, 2)})) in (0, 1)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert cli_main(["merge", *map(str, parts), "--out", str(self.out)]) in (0, 1)
        self.ran(cases, cases)
        check_merged(printed.getvalue(), self.selection_rows(cases), cases, epochs)

    @precondition(lambda self: self.has_results())
    @rule(selection=selections)
    def resume(self, selection):
        STEPS['resume'] += 1
        cases = selected(selection, self.epochs)
        to_run = self.unfinished(cases)  # (before the session changes the model)
        if self.session(cases, "--resume", *selection_flags(selection)) is not None:
            self.ran(to_run, cases, resumed=True)
            self.printed(cases, nothing_left=not to_run)

    @precondition(lambda self: self.has_results())
    @rule(selection=selections)
    def last_failed(self, selection):
        """`--lf`: the cases without a correct row in this folder run again."""
        STEPS['last_failed'] += 1
        cases = selected(selection, self.epochs)
        passed = {key for key in cases if self.rows.get(key) == "correct"}
        if self.session(cases, *selection_flags(selection), pytest_args=("--lf",)) is not None:
            self.ran([key for key in cases if key not in passed], cases, passed)
            if len(passed) < len(cases):  # (with nothing failed, nothing runs and no table is printed)
                self.printed(cases, passed)

    @precondition(lambda self: self.has_results())
    @rule(selection=selections, names=st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True))
    def keyword(self, selection, names):
        """`-k` narrows to the instances named; those run again, the others are kept."""
        STEPS['keyword'] += 1
        cases = selected(selection, self.epochs)
        matched = [key for key in cases if any(name.lower() in node_name(key, self.epochs).lower() for name in names)]
        if not matched:  # nothing to run: pytest's "no tests ran", `run`'s exit 2, the folder as it was
            before = folder_bytes(self.out)
            assert self.run(self.out, *selection_flags(selection), pytest_args=("-k", " or ".join(names))) == 2
            assert folder_bytes(self.out) == before
            return
        self.session(cases, *selection_flags(selection), pytest_args=("-k", " or ".join(names)))
        self.ran(matched, cases, {key for key in cases if key not in matched})
        self.printed(cases, {key for key in cases if key not in matched})

    @rule()
    def endpoint_flips(self):
        STEPS['endpoint_flips'] += 1
        self.failing = not self.failing

    @precondition(lambda self: self.has_results())
    @rule(selection=selections, other=st.sampled_from([("--temperature", "0.7"), ("--model", "gold"),
                                                        ("--epochs", "3")]), fresh=st.booleans())
    def refused(self, selection, other, fresh):
        """A second run with other measured settings (or a fresh run without --overwrite): refused, untouched."""
        STEPS['refused'] += 1
        before = folder_bytes(self.out)
        flags = [*selection_flags(selection), *([] if fresh else ["--resume"]), *other]
        assert self.run(self.out, *flags) == 2
        assert folder_bytes(self.out) == before

    @precondition(lambda self: self.has_results())
    @rule(selection=selections, after=st.integers(1, 2), torn=st.booleans())
    def killed(self, selection, after, torn):
        """A session killed (as by `kill -9`) once `after` instances were written, maybe mid-line."""
        STEPS['killed'] += 1
        cases = selected(selection, self.epochs)
        if not cases:
            return
        to_run = self.unfinished(cases)
        flags = selection_flags({**selection, "limit": selection["limit"] or (None if selection["only"] else 2)})
        command = [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "bench_tests"), "-q", "-p", "no:cacheprovider",
                   "-p", "kill_plugin", "--apibank-out-dir", str(self.out), "--apibank-model", "stub",
                   "--apibank-base-url", self.stub.url, "--apibank-no-cache", "--apibank-max-retries", "0",
                   "--apibank-down-after", "0", "--apibank-concurrency", "1",
                   "--apibank-epochs", str(self.epochs), "--apibank-resume",
                   *("--apibank-" + flag[2:] if flag.startswith("--") else flag for flag in flags)]
        env = {**os.environ, "APIBANK_KILL_AFTER": str(after),
               "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               **({"APIBANK_KILL_TORN": str(self.out)} if torn else {})}
        self.sessions += 1
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
        if len(to_run) < after:  # it finished before the kill
            assert done.returncode in (0, 1), done.stdout[-3000:]
            self.ran(to_run, cases, resumed=True)
            return
        assert done.returncode == 9, done.stdout[-3000:]
        now = {(row["id"], row.get("epoch", 0)): kind(row) for row in written_rows(self.out)}
        changed = [key for key in to_run if now.get(key) != self.rows.get(key)]
        assert len(changed) <= after and all(now[key] == self.expected(key) for key in changed)
        for key in changed:
            self.rows[key] = now[key]
        self.summary_fresh = False  # a killed session writes no summary
        self.unreadable += torn

    @precondition(lambda self: self.has_results())
    @rule(selection=selections, after=st.integers(1, 2))
    def interrupted(self, selection, after):
        """`apibank-bench run --resume` given a Ctrl-C once `after` instances were written: it winds down, and
        its summary and closing table count what it finished."""
        STEPS['interrupted'] += 1
        cases = selected(selection, self.epochs)
        if not cases:
            return
        to_run = self.unfinished(cases)
        if len(to_run) <= after:
            return  # (it would finish before the Ctrl-C: the resume rule's)
        command = [sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(self.out), "--model", "stub",
                   "--base-url", self.stub.url, "--no-cache", "--max-retries", "0", "--max-consecutive-errors", "0",
                   "--concurrency", "1", "--epochs", str(self.epochs), "--resume", *selection_flags(selection),
                   "--", "-p", "kill_plugin", "-p", "no:cacheprovider"]
        env = {**os.environ, "APIBANK_INTERRUPT_AFTER": str(after),
               "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
        self.sessions += 1
        done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
        # 130; or 0/1 where the run's selection held fewer cases to run than the model's reading of the flags
        assert done.returncode in (0, 1, 130), done.stdout[-3000:] + done.stderr[-3000:]
        now = {(row["id"], row.get("epoch", 0)): kind(row) for row in written_rows(self.out)}
        changed = [key for key in to_run if now.get(key) != self.rows.get(key)]
        assert all(now[key] == self.expected(key) for key in changed)
        for key in changed:
            self.rows[key] = now[key]
        self.last, self.summary_fresh = (cases, set()), True
        self.output = done.stdout
        assert ("INCOMPLETE: " in self.output) or done.returncode != 130, self.output[-3000:]
        self.printed(cases)

    # -- what must hold after every step ------------------------------------------------------------

    @precondition(lambda self: bool(written_rows(self.out)))
    @rule(data=st.data())
    def corrupt_a_line(self, data):
        """A line of results.jsonl becomes unreadable (a disk, an editor, a copy cut short)."""
        STEPS["corrupt_a_line"] += 1
        path = self.out / "results.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        number = data.draw(st.sampled_from([n for n, line in enumerate(lines) if _readable(line)]))
        row = json.loads(lines[number])
        lines[number] = b'{"id": "' + row["id"].encode() + b'", "cut\n'
        path.write_bytes(b"".join(lines))
        del self.rows[(row["id"], row.get("epoch", 0))]
        self.unreadable += 1
        self.summary_fresh = False

    # -- what must hold after every step ------------------------------------------------------------

    @invariant()
    def no_row_lost_or_duplicated(self):
        """Each case's last line is its row (the model's); an earlier line of a case can only be an error row
        that a killed session's retry superseded (a run's end puts the files in order, one line per case)."""
        rows = written_rows(self.out)
        keys = [(row["id"], row.get("epoch", 0)) for row in rows]
        assert {key: kind(row) for key, row in zip(keys, rows)} == self.rows
        superseded = [kind(row) for index, (key, row) in enumerate(zip(keys, rows)) if key in keys[index + 1:]]
        assert all(what == "error" for what in superseded), "a finished row is duplicated"
        assert not superseded or not self.summary_fresh, "a finished session left two lines for a case"

    @invariant()
    def one_runs_settings(self):
        if not (self.out / "run.json").is_file():
            assert not self.rows
            return
        recorded = json.loads((self.out / "run.json").read_text())["settings"]
        assert {name: recorded[name] for name in MEASURED} == MEASURED and recorded["epochs"] == self.epochs
        summary = self.summary()
        if summary is not None:
            run = summary["config"]["run"]
            assert {name: run[name] for name in MEASURED} == MEASURED and run["epochs"] == self.epochs

    @invariant()
    def summary_counts_the_rows(self):
        summary = self.summary()
        if not self.summary_fresh or summary is None:
            return
        cases, deselected = self.last
        rows = [row for row in written_rows(self.out) if (row["id"], row.get("epoch", 0)) in set(cases)]
        # with epochs, `total` counts instances and `attempts` their (instance, epoch) rows
        assert summary["selected"] == len(cases) and summary.get("attempts", summary["total"]) == len(rows)
        assert summary["total"] == len({row["id"] for row in rows})
        assert summary["correct"] == sum(kind(row) == "correct" for row in rows)
        assert summary["errors"] == sum(kind(row) == "error" for row in rows)
        assert summary["unreadable_lines"] == self.unreadable
        # complete: a finished row for every case of the selection, deselected by pytest (`-k`) or not
        assert summary["complete"] == all(self.rows.get(key) in ("correct", "wrong") for key in cases)

    def summary(self) -> dict | None:
        path = self.out / "summary.json"
        return json.loads(path.read_text()) if path.is_file() else None


def _readable(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


FolderMachine.TestCase.settings = SETTINGS


def test_a_results_folder_holds_what_its_runs_made():
    STEPS.clear()
    FolderMachine.TestCase().runTest()
    print(f"\nfolder states: {sum(STEPS.values())} steps: {dict(STEPS)}")
    assert STEPS["resume"] + STEPS["last_failed"] + STEPS["keyword"] > 0  # it went past the first run
    assert STEPS["first_run"] + STEPS["shards_merged"] > 0 and STEPS["messages checked"] > 0
