"""The table the growth benchmarks print (bench_parser.py, bench_tool_text.py): for each family of hostile
texts, the fastest of `--repeats` timings at each size, and the ratio of the two largest sizes' times
beside the ratio of the sizes (equal for linear growth, its square for quadratic)."""

from __future__ import annotations

import argparse
import time
from typing import Callable


def best_time(run: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(text)
        best = min(best, time.perf_counter() - start)
    return best


def print_growth(doc: str, families: dict[str, Callable[[int], str]], sizes: tuple[int, ...],
                 run: Callable[[str], object], ratio_label: str, decimals: int = 1) -> None:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per size; the fastest is reported")
    args = parser.parse_args()
    width = 8 + decimals
    print(f"{'family':<26}" + "".join(f"{size:>{width + 2},}" for size in sizes)
          + f"{ratio_label:>{len(ratio_label) + 2}}{'size ratio':>12}")
    for name, make in families.items():
        times = [best_time(run, make(size), args.repeats) for size in sizes]
        cells = "".join(f"{seconds * 1000:>{width}.{decimals}f}ms" for seconds in times)
        print(f"{name:<26}{cells}{times[-1] / max(times[-2], 1e-9):>{len(ratio_label) + 2}.1f}"
              f"{sizes[-1] / sizes[-2]:>12.1f}")
