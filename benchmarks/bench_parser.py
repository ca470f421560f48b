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

import argparse
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))  # runs from a checkout without installing

from apibank_bench.scoring.parsing import ParseError, parse_call  # noqa: E402

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


def best_time(answer: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            parse_call(answer)
        except ParseError:
            pass
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per size; the fastest is reported")
    args = parser.parse_args()
    print(f"{'family':<26}" + "".join(f"{size:>10,}" for size in SIZES) + f"{'90k/30k':>9}{'size ratio':>12}")
    for name, make in FAMILIES.items():
        times = [best_time(make(size), args.repeats) for size in SIZES]
        cells = "".join(f"{seconds * 1000:>8.1f}ms" for seconds in times)
        print(f"{name:<26}{cells}{times[-1] / times[-2]:>9.1f}{SIZES[-1] / SIZES[-2]:>12.1f}")


if __name__ == "__main__":
    main()
