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

import json
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))  # runs from a checkout without installing

from apibank_bench.agents.tool_answer import read_answer  # noqa: E402
from growth_table import print_growth  # noqa: E402

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


if __name__ == "__main__":
    print_growth(__doc__, FAMILIES, SIZES, lambda text: read_answer(text, [], SCHEMAS, "both"), "900k/300k", 2)
