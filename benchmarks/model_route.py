"""Where `--model` travels, from the flag to the request body: every function of the package that receives the
model's name, as an argument or a part of one (a field of a RunConfig or ModelConfig, an item of a request
body), in the order it is called, on a real `apibank-bench run --model NAME --base-url STAND-IN --limit 1`
in this process. It prints the modules in the order entered (a "stay": calls in one module in a row), the
rooms (modules entered) and the climbs (a stay in a module of a higher layer than the stay before it, by
docs/architecture.md's layer table).

    python benchmarks/model_route.py            # the stays
    python benchmarks/model_route.py --calls    # every call, with the argument that held the name
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted OpenAI-protocol server and the layer table's reader

from openai_stub import OpenAIStub, correct  # noqa: E402
from helpers import layer_of  # noqa: E402

MARK = "route-mark-model"  #: the model name followed: no other value of a run contains it
PACKAGE = str(ROOT / "apibank_bench") + os.sep
DEPTH = 2  #: how far into an argument the name is looked for (a RunConfig's field: 1; a client's config's: 2)


def holds(value, depth: int = DEPTH) -> bool:
    """Whether `value` is, or holds within `depth` steps, the model's name."""
    if isinstance(value, str):
        return MARK in value
    if isinstance(value, (bytes, bytearray)):
        return MARK.encode() in value
    if depth == 0 or value is None or isinstance(value, (int, float, bool, Path)):
        return False
    if isinstance(value, dict):
        return any(holds(k, depth - 1) or holds(v, depth - 1) for k, v in list(value.items())[:50])
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds(item, depth - 1) for item in list(value)[:50])
    if dataclasses.is_dataclass(value):
        return any(holds(getattr(value, f.name, None), depth - 1) for f in dataclasses.fields(value))
    return False


def record(calls: list):
    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGE):
            return
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:count]
        for name in names:
            if name in ("self", "cls"):
                continue
            if holds(frame.f_locals.get(name)):
                module = code.co_filename[len(PACKAGE):].removesuffix(".py")
                calls.append((module, code.co_qualname, name))
                return
    return profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", action="store_true", help="every call, not only the stays")
    parser.add_argument("--whole", action="store_true", help="the whole run, not only up to the first request body")
    args = parser.parse_args()
    from apibank_bench.cli import main as cli

    calls: list = []
    with OpenAIStub(default=lambda body: correct()) as stub, tempfile.TemporaryDirectory() as out:
        argv = ["run", "--model", MARK, "--base-url", stub.url, "--limit", "1", "--no-cache", "--out-dir", out,
                "-q"]
        profile = record(calls)
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            code = cli(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    if code != 0:
        print(f"the run exited {code}", file=sys.stderr)
        return 1
    if not args.whole:  # from the flag to the first request body sent (llm/http's)
        first = next(i for i, (module, _, _) in enumerate(calls) if module == "llm/http")
        calls = calls[:first + 1]
    layers = layer_of()
    stays: list[tuple[str, list]] = []
    for module, function, name in calls:
        if stays and stays[-1][0] == module:
            stays[-1][1].append((function, name))
        else:
            stays.append((module, [(function, name)]))
    climbs, rooms = 0, []
    for index, (module, inside) in enumerate(stays):
        floor = layers[module.split("/")[0]]
        up = index > 0 and floor > layers[stays[index - 1][0].split("/")[0]]
        climbs += up
        if module not in rooms:
            rooms.append(module)
        functions = list(dict.fromkeys(function for function, _ in inside))
        print(f"{index + 1:3}. {'UP ' if up else '   '}{module:32} {len(inside):4} calls: {', '.join(functions[:6])}"
              + (" ..." if len(functions) > 6 else ""))
        if args.calls:
            for function, name in inside:
                print(f"        {function}({name})")
    print(f"{len(stays)} stays, {len(rooms)} rooms, {climbs} climbs, {len(calls)} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
