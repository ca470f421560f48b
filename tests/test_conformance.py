"""Our APIs against upstream's, on every pool task and on systematically perturbed arguments.

Runs against upstream's code at APIBANK_UPSTREAM, by default `../shared/apibank` beside the
project when that folder holds upstream's `apis/` (so CI runs every case); it skips, saying
why, where there is no upstream checkout. Both
sides run in equivalent fresh environments: per-tool copies of the same initial
databases, each side's own CheckToken as token checker, parameters converted by
our `convert_parameters`, and the task's earlier API calls replayed first (with
the global `random` seeded alike, for the random tokens and appointment IDs; our
side gets the task's read-only parameters as the scorer does, upstream's plain
copies as the reference harness does). So only the API classes differ. Compared, per argument variant: every replayed
call's result, the call's result (or exception type and message), the
`check_api_call_correctness` verdict against the gold record (or its exception),
a repeat of the same call, the gold call made next, and the databases of all
tools afterwards.

Not compared call by call:
* ToolSearcher: compared in tests/test_toolsearch.py (upstream's file is not even
  loaded here: it imports sentence-transformers, hence torch). For ToolSearcher
  pool tasks only the replay of the earlier calls is compared.
* SearchEngine and Translate: upstream needs the network for them (nltk's punkt
  download, Google Translate), so their files load with stub modules for the
  missing third-party packages, and only their metadata and signatures are compared.
* Dictionary: upstream queries a web dictionary for every call (metadata and
  signatures only).
"""

from __future__ import annotations

import datetime
import importlib.util
import inspect
import os
import random
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from apibank_bench.data import specs
from apibank_bench.apis import api_classes
from apibank_bench.apis.environment import Environment, initial_databases
from apibank_bench.core.frozen import thaw
from apibank_bench.data.manifests import POOL_MANIFEST, read_manifest
from apibank_bench.core.paths import PROJECT_ROOT, require_root
from apibank_bench.scoring import Scorer
from apibank_bench.data.tasks import get_task, load_level


def _load_helper():
    # By file path: this folder is not on sys.path under every pytest import mode.
    path = Path(__file__).with_name("upstream_apibank.py")
    name = "_apibank_upstream_loader"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


load_upstream_apis = _load_helper().load_upstream_apis

SHARED_UPSTREAM = PROJECT_ROOT.parent / "shared" / "apibank"  #: upstream's code beside its data, where CI has it


def _upstream() -> str:
    """APIBANK_UPSTREAM if set, else ../shared/apibank when it holds upstream's `apis/`, else ''."""
    if "APIBANK_UPSTREAM" in os.environ:
        return os.environ["APIBANK_UPSTREAM"]
    return str(SHARED_UPSTREAM) if (SHARED_UPSTREAM / "apis").is_dir() else ""


UPSTREAM = _upstream()

pytestmark = pytest.mark.skipif(
    not UPSTREAM,
    reason=f"no upstream api-bank checkout: APIBANK_UPSTREAM names none and {SHARED_UPSTREAM} has no apis/ "
           "(point APIBANK_UPSTREAM at one to compare our APIs with upstream's)",
)

NETWORK_APIS = frozenset({"SearchEngine", "Translate", "Dictionary"})  # see the module docstring
SEED = 20230331
KINDS = ("gold", "values", "case", "whitespace", "missing_extra", "types", "datetimes", "other_calls")


# -- the two environments ---------------------------------------------------------------

def UpstreamEnvironment(classes: dict, root):
    """Upstream's classes, built and called exactly as our `Environment` builds and calls ours."""
    return _load_helper().UpstreamTools(classes, initial_databases(root), copy=thaw)


@cache
def upstream_classes(api_set: str) -> dict:
    return load_upstream_apis(UPSTREAM, api_set).classes


def canon(value):
    """A comparable form: exceptions as (type, message); scalars keep their type; dict order ignored."""
    if isinstance(value, BaseException):
        return ("exception", type(value).__name__, str(value))
    if isinstance(value, dict):
        return ("dict", sorted(((canon(k), canon(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return ("list" if isinstance(value, list) else "tuple", [canon(item) for item in value])
    return (type(value).__name__, repr(value))  # also datetimes and other objects


def attempt(action):
    try:
        return "ok", action()
    except Exception as exc:  # the exception's type and message are part of the behaviour
        return "raised", exc


def run_side(make_env, task, params, plain: bool) -> dict:
    """Replay, call, check, repeat the call, make the gold call, and collect the databases
    (all in canonical form).

    Our side replays the task's read-only (frozen) parameters, as the scorer does;
    upstream's gets plain copies, as the reference harness passes them."""
    random.seed(SEED)
    env = make_env()
    outcome = {"replay": []}
    for turn in task.prior_api_turns:
        if turn.api_name != "ToolSearcher":  # as our Environment.replay does
            turn_params = thaw(turn.params) if plain else turn.params
            outcome["replay"].append(canon(attempt(lambda: env.call(turn.api_name, turn_params))))  # noqa: B023 - called at once
    name = task.gold.api_name
    if params is not None:
        status, result = attempt(lambda: env.call(name, params))
        outcome["call"] = canon((status, result))
        if status == "ok":
            check = env.tool(name).check_api_call_correctness
            outcome["check"] = canon(attempt(lambda: check(thaw(result), thaw(task.gold.result))))
        outcome["repeat"] = canon(attempt(lambda: env.call(name, params)))
        # then the gold call: state left behind by a wrong call shows up here
        outcome["gold after"] = canon(attempt(lambda: env.call(name, thaw(task.gold.params))))
    for tool_name, tool in sorted(env._tools.items()):
        outcome["database " + tool_name] = canon(tool.database) if hasattr(tool, "database") else None
    return outcome


def _short(value, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def compare(task, params, root) -> list[str]:
    api_set = specs.api_set_for_level(task.level)
    ours = run_side(lambda: Environment(api_set, root), task, params, plain=False)
    theirs = run_side(lambda: UpstreamEnvironment(upstream_classes(api_set), root), task, params, plain=True)
    for aspect in [key for key, value in theirs.items() if key.startswith("database ") and value is None]:
        # An upstream class without a `database` (Calculator, most Level-3 classes, which
        # keep their tables in attributes of their own) against our unused empty one.
        theirs.pop(aspect), ours.pop(aspect, None)
    return [f"{aspect}: upstream {_short(theirs.get(aspect))} != ours {_short(ours.get(aspect))}"
            for aspect in sorted(theirs.keys() | ours.keys()) if theirs.get(aspect) != ours.get(aspect)]


# -- argument variants -------------------------------------------------------------------

_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONTH_DAY = re.compile(r"\d{2}-\d{2}")


def _time_variants(value: str) -> list[str]:
    """The same moment in other formats, nearby moments, and impossible dates."""
    if _DATETIME.fullmatch(value):
        fmt, moment = "%Y-%m-%d %H:%M:%S", datetime.datetime.strptime(value, "%Y-%m-%d %H:%M:%S")
        formats = ["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d", "%d-%m-%Y %H:%M:%S",
                   "%m/%d/%Y %I:%M %p", "%B %d, %Y %H:%M", "%H:%M:%S", "%H:%M", "%y-%m-%d %H:%M:%S", "%m-%d"]
        unpadded = f"{moment.year}-{moment.month}-{moment.day} {moment.hour}:{moment.minute:02d}:{moment.second:02d}"
        shifts = [datetime.timedelta(days=1), datetime.timedelta(hours=1), datetime.timedelta(minutes=-1)]
        impossible = [value[:5] + "02-30" + value[10:], value[:5] + "13-01" + value[10:], value[:11] + "24:00:00"]
    elif _DATE.fullmatch(value):
        fmt, moment = "%Y-%m-%d", datetime.datetime.strptime(value, "%Y-%m-%d")
        formats = ["%Y/%m/%d", "%d-%m-%Y", "%m/%d/%Y", "%B %d, %Y", "%Y-%m-%d %H:%M:%S", "%y-%m-%d", "%m-%d", "%Y%m%d"]
        unpadded = f"{moment.year}-{moment.month}-{moment.day}"
        shifts = [datetime.timedelta(days=1), datetime.timedelta(days=-1), datetime.timedelta(days=365)]
        impossible = [value[:5] + "02-30", value[:5] + "13-01", "0" + value[1:]]
    elif _MONTH_DAY.fullmatch(value):
        fmt, moment = "%m-%d", datetime.datetime.strptime("2000-" + value, "%Y-%m-%d")
        formats = ["%m/%d", "%d-%m", "%B %d", "%Y-%m-%d", "%m-%d 00:00:00"]
        unpadded = f"{moment.month}-{moment.day}"
        shifts = [datetime.timedelta(days=1), datetime.timedelta(days=-1)]
        impossible = ["02-30", "13-01", "00-00"]
    else:
        return []
    fullwidth = value.translate({ord(digit): 0xFF10 + int(digit) for digit in "0123456789"})  # strptime takes these
    suffixed = [value + ".5", value + "Z", value + "\n"]
    return [moment.strftime(f) for f in formats] + [unpadded, fullwidth] + suffixed + \
        [(moment + shift).strftime(fmt) for shift in shifts] + impossible


def _wrong_values(value, kind: str) -> list:
    if kind == "int":
        try:
            number = int(value)
        except (TypeError, ValueError):
            return [0, 1]
        return [number + 1, number - 1, 0, -1, 10**9]
    if kind == "float":
        try:
            number = float(value)
        except (TypeError, ValueError):
            return [0.0, 1.0]
        return [number + 0.0001, -number, 0.0, number * 10]
    if isinstance(value, list):
        out = [[], value[:-1], list(reversed(value)), value + value[:1]]
        return out + [[item.lower() if isinstance(item, str) else item for item in value]]
    if isinstance(value, str):
        return ["Nonexistent", value[:-1], value + "x", "invalid_token" if value else "x"]
    return ["Nonexistent"]


def _wrong_types(value, kind: str) -> list:
    if kind == "int":
        return [str(value), f"{value}.0", 1.9, True, None, "abc", [value]]
    if kind == "float":
        return [str(value), "1e2", "nan", "inf", "-0", True, None, "abc", 7]
    if isinstance(value, list):
        return [", ".join(map(str, value)), None, tuple(value), {"items": value}, [1, 2], [value], str(value)]
    return [0, 1.5, None, True, [value], {"value": value}, (value,), b"bytes"]


def _string_variants(value) -> tuple[list, list]:
    if not isinstance(value, str):
        return [], []
    case = [value.upper(), value.lower(), value.title(), value.swapcase()]
    space = [" " + value, value + " ", f" {value} ", f"\t{value}\n", value.replace(" ", "  "),
             value.replace(" ", ""), "", " "]
    return case, space


@dataclass(frozen=True)
class Case:
    task_id: str
    api: str
    kind: str
    variants: tuple  #: (label, params or None for "replay only")

    @property
    def id(self) -> str:
        return f"{self.task_id.replace('::', '/')}-{self.api}-{self.kind}"


def _other_values(root) -> dict:
    """Per (API set, API, parameter): the distinct gold values in all the data, in data order."""
    values: dict = {}
    for level in ("1", "2", "3"):
        for task in load_level(level, root):
            for name, value in task.gold.params.items():
                bucket = values.setdefault((specs.api_set_for_level(level), task.gold.api_name, name), [])
                if thaw(value) not in bucket:
                    bucket.append(thaw(value))
    return values


def _other_calls(root) -> dict:
    calls: dict = {}
    for level in ("1", "2", "3"):
        for task in load_level(level, root):
            bucket = calls.setdefault((specs.api_set_for_level(level), task.gold.api_name), [])
            if thaw(task.gold.params) not in bucket:
                bucket.append(thaw(task.gold.params))
    return calls


def variants_for(task, other_values, other_calls) -> dict[str, list]:
    api_set = specs.api_set_for_level(task.level)
    name = task.gold.api_name
    gold = thaw(task.gold.params)
    if name == "ToolSearcher":
        return {"gold": [("replay only", None)]}
    declared = api_classes(api_set)[name].input_parameters
    out: dict[str, list] = {kind: [] for kind in KINDS}
    out["gold"].append(("gold", gold))
    for key, value in gold.items():
        kind = declared.get(key, {}).get("type")
        others = [v for v in other_values.get((api_set, name, key), []) if v != value][:4]
        for wrong in _wrong_values(value, kind) + others:
            out["values"].append((f"{key}={wrong!r}", {**gold, key: wrong}))
        case, space = _string_variants(value)
        out["case"] += [(f"{key}={v!r}", {**gold, key: v}) for v in case]
        out["whitespace"] += [(f"{key}={v!r}", {**gold, key: v}) for v in space]
        out["types"] += [(f"{key}={v!r}", {**gold, key: v}) for v in _wrong_types(value, kind)]
        if isinstance(value, str):
            out["datetimes"] += [(f"{key}={v!r}", {**gold, key: v}) for v in _time_variants(value)]
        out["missing_extra"].append((f"without {key}", {k: v for k, v in gold.items() if k != key}))
        out["missing_extra"].append((f"{key.upper()}= instead of {key}=",
                                     {(k.upper() if k == key else k): v for k, v in gold.items()}))
    if gold:
        out["missing_extra"].append(("no arguments", {}))
    out["missing_extra"].append(("extra argument", {**gold, "extra": "x"}))
    out["other_calls"] = [(f"gold call of another task: {call!r}", call)
                          for call in other_calls.get((api_set, name), []) if call != gold][:6]
    for kind, items in out.items():  # drop duplicates (e.g. an upper-case value that was already upper case)
        seen, unique = set(), []
        for label, params in items:
            key = repr(params) + repr({k: type(v).__name__ for k, v in params.items()})
            if params != gold or kind == "gold":
                if key not in seen:
                    seen.add(key)
                    unique.append((label, params))
        out[kind] = unique
    return {kind: items for kind, items in out.items() if items}


def _cases() -> list:
    if not UPSTREAM:
        return [Case("-", "-", "-", ())]
    root = require_root()
    other_values, other_calls = _other_values(root), _other_calls(root)
    cases = []
    for task_id in read_manifest(POOL_MANIFEST)["ids"]:
        task = get_task(task_id, root=root)
        for kind, items in variants_for(task, other_values, other_calls).items():
            cases.append(Case(task_id, task.gold.api_name, kind, tuple(items)))
    return cases


CASES = _cases()


# -- the tests ---------------------------------------------------------------------------

def _signature(function) -> list:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("api_set", specs.API_SETS)
def test_same_api_classes_metadata_and_signatures(api_set):
    upstream = load_upstream_apis(UPSTREAM, api_set).classes
    ours = api_classes(api_set)
    assert sorted(upstream) == sorted(set(ours) - {"ToolSearcher"})
    for name, up in upstream.items():
        mine = ours[name]
        for attribute in ("description", "input_parameters", "output_parameters"):
            assert getattr(mine, attribute) == getattr(up, attribute), (name, attribute)
        assert mine.database_name == getattr(up, "database_name", None), name
        assert _signature(mine.call) == _signature(up.call), name
        assert _signature(mine.check_api_call_correctness) == _signature(up.check_api_call_correctness), name


def test_only_network_apis_need_stubs():
    loaded = load_upstream_apis(UPSTREAM, specs.LEVEL12)
    assert loaded.stubbed <= NETWORK_APIS, loaded.stubbed


def test_every_pool_task_is_compared():
    ids = read_manifest(POOL_MANIFEST)["ids"]
    assert len(ids) == 445
    assert {case.task_id for case in CASES} == set(ids)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_pool_task_matches_upstream(case):
    root = require_root()
    task = get_task(case.task_id, root=root)
    assert task.gold.api_name not in NETWORK_APIS  # the pool leaves these out
    mismatches = []
    for label, params in case.variants:
        for difference in compare(task, params, root):
            mismatches.append(f"  [{label}] {difference}")
    if case.kind == "gold" and task.gold.api_name != "ToolSearcher":
        # The scorer (the path a real answer takes) agrees with upstream's verdict on the gold call.
        up = UpstreamEnvironment(upstream_classes(specs.api_set_for_level(task.level)), root)
        random.seed(SEED)
        for turn in task.prior_api_turns:
            if turn.api_name != "ToolSearcher":
                up.call(turn.api_name, thaw(turn.params))
        result = up.call(task.gold.api_name, thaw(task.gold.params))
        verdict = bool(up.tool(task.gold.api_name).check_api_call_correctness(thaw(result), thaw(task.gold.result)))
        assert Scorer(root).gold_replay(task).correct == verdict
    assert not mismatches, (
        f"{task.combined_id} [{task.gold.api_name}] {case.kind}: {len(mismatches)} differences "
        f"over {len(case.variants)} variants:\n" + "\n".join(mismatches[:25])
    )
