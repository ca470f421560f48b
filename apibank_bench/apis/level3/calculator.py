"""Level 3: Calculator, upstream's list-rewriting evaluator (`apis.arithmetic`), never eval."""

from __future__ import annotations

from apibank_bench.apis.arithmetic import calculate
from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi


@LEVEL3.register_api
class Calculator(InlineApi):
    @enveloped
    def call(self, formula: str) -> float:
        return calculate(formula)

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Spaces in the formula are ignored; output and exception must be equal.
        same_formula = response["input"]["formula"].replace(" ", "") == groundtruth["input"]["formula"].replace(" ", "")
        return same_formula and response["output"] == groundtruth["output"] and response["exception"] == groundtruth["exception"]
