#!/usr/bin/env python
"""How reading a tool call in the text (agents.tool_text, agents.tool_answer) grows with the text's length,
on hostile text: markers repeated, braces that never close, calls nested past the decoder, a fenced
block that never ends, and one long call.

For each family, times `read_answer` (server `tool_calls` none, `--tool-parse both`) at sizes from about
1 KB to 900 KB and prints each time and the ratio of the 900 KB time to the 300 KB time: near 3 (the
size ratio) is linear growth, near 9 quadratic.

    python benchmarks/bench_tool_text.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))  # runs from a checkout without installing

from apibank_bench.agents.tool_answer import read_answer  # noqa: E402

SCHEMAS = [{"name": "AddAlarm", "input_parameters": {"token": {"type": "str"}, "time": {"type": "str"}}}]
FAMILIES = {
    "<tool_call> repeated": lambda size: "<tool_call>" * (size // 11),
    "[TOOL_CALLS] repeated": lambda size: "[TOOL_CALLS]" * (size // 12),
    "unclosed braces": lambda size: "{" * size,
    "nested past the decoder": lambda size: "<tool_call>" + "[" * (size // 2) + "]" * (size // 2) + "</tool_call>",
    "unended ```json": lambda size: "```json\n{" + '"a": 1, ' * (size // 8),
    "one long call": lambda size: "<tool_call>" + json.dumps(
        {"name": "AddAlarm", "arguments": {"token": "x" * size, "time": "2023-03-16 07:00:00"}}) + "</tool_call>",
}
SIZES = (1_000, 10_000, 100_000, 300_000, 900_000)


def best_time(text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        read_answer(text, [], SCHEMAS, "both")
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per size; the fastest is reported")
    args = parser.parse_args()
    print(f"{'family':<26}" + "".join(f"{size:>11,}" for size in SIZES) + f"{'900k/300k':>11}{'size ratio':>12}")
    for name, make in FAMILIES.items():
        times = [best_time(make(size), args.repeats) for size in SIZES]
        cells = "".join(f"{seconds * 1000:>9.2f}ms" for seconds in times)
        print(f"{name:<26}{cells}{times[-1] / max(times[-2], 1e-9):>11.1f}{SIZES[-1] / SIZES[-2]:>12.1f}")


if __name__ == "__main__":
    main()
