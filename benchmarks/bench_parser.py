#!/usr/bin/env python
"""How parse time grows with the answer's length, on adversarial answers.

For each family of hostile answers (unclosed calls, deeply nested calls that all
fail, nested calls that parse, unbalanced brackets, escaped quotes, many calls),
times `parse_call` at sizes from about 1 KB to 90 KB and prints each time and
the ratio of the 90 KB time to the 30 KB time. Linear growth shows as a ratio
near 3 (the size ratio); quadratic growth as one near 9.

    python benchmarks/bench_parser.py [--repeats 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))  # runs from a checkout without installing

from apibank_bench.scoring.parsing import ParseError, parse_call  # noqa: E402
from growth_table import print_growth  # noqa: E402

# Each family makes an answer of roughly `size` characters.
FAMILIES = {
    "unclosed [A(": lambda size: "[A(" * (size // 3),
    "nested, all fail": lambda size: "[A(x" * (size // 6) + ")]" * (size // 6),
    "nested, innermost parses": lambda size: "[A(x=" * (size // 7) + "1" + ")]" * (size // 7),
    "unbalanced [A(]": lambda size: "[A(]" * (size // 5) + ")" * (size // 5) + "[]",
    "escaped quotes": lambda size: "[A('\\'" * (size // 7) + "]" * (size // 7),
    "many calls": lambda size: "[A(x=1)] " * (size // 9),
}
SIZES = (1_000, 3_000, 10_000, 30_000, 90_000)


def parse(answer: str) -> None:
    try:
        parse_call(answer)
    except ParseError:
        pass


if __name__ == "__main__":
    print_growth(__doc__, FAMILIES, SIZES, parse, "90k/30k")
