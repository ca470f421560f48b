"""Level 3: Calculator, a left-to-right arithmetic reducer (never eval).

Upstream's Level-3 calculator does not use Python's parser: it turns the formula
into a flat list of numbers and one-character tokens and rewrites that list. We
reproduce that procedure, because its oddities are part of the results:

* only `+ - * / ( )`, ASCII digits and spaces are accepted (spaces are removed);
  anything else, an unbalanced parenthesis count, no operator at all, or exactly
  "one operator more than needed" (`len == operators + 1`) is 'invalid formula';
* numbers become floats, so results are floats (`1/0` gives 'float division by zero');
* a parenthesis group is the first '(' up to the first ')', so nested groups fail
  with "')' is not in list" and ')' before '(' with 'list index out of range';
* `*` and `/` are applied first, then `+` and `-`, each pass taking the leftmost
  operator; an operator next to another operator or a parenthesis reaches Python's
  arithmetic with a string operand and fails with Python's TypeError text;
* numbers left side by side are not multiplied: the first one wins, '(1)(2)+3' gives 1.0.

Documented difference: when the leftmost operator of a pass stands first in its
list (a leading sign, as in '-3+2' or '2*(-3)') and the operation succeeds,
upstream's rewrite never removes that operator and loops forever (or until memory
runs out). We raise 'invalid formula' there instead of hanging.
"""

from __future__ import annotations

import operator
import re

from ..base import LEVEL3
from ._common import InlineApi

_ALLOWED = set("0123456789+-*/()")
_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_TOKEN = re.compile(r"[0-9]+|.")  # a run of digits, or any single character
_PASSES = (("*", "/"), ("+", "-"))


def _is_valid(formula: str) -> bool:
    operators = sum(formula.count(op) for op in _OPERATORS)
    return (
        formula != ""
        and all(char in _ALLOWED for char in formula)
        and formula.count("(") == formula.count(")")
        and operators > 0
        and operators + 1 != len(formula)
    )


def _tokens(formula: str) -> list:
    return [float(tok) if tok.isdigit() else tok for tok in _TOKEN.findall(formula)]


def _apply(tokens: list, at: int) -> None:
    """Replace tokens[at-1:at+2] (left, operator, right) by the operation's value."""
    # tokens[at - 1] is the *last* token when at == 0, as in upstream.
    value = _OPERATORS[tokens[at]](tokens[at - 1], tokens[at + 1])
    if at == 0:
        # Upstream's slice assignment would leave the operator in front for ever.
        raise Exception("invalid formula")
    tokens[at - 1:at + 2] = [value]


def _reduce(tokens: list):
    while "(" in tokens:
        start, end = tokens.index("("), tokens.index(")")
        tokens[start:end + 1] = [_reduce(tokens[start + 1:end])]
    for ops in _PASSES:
        while any(op in tokens for op in ops):
            _apply(tokens, min(tokens.index(op) for op in ops if op in tokens))
    return tokens[0]


def calculate(formula: str):
    formula = formula.replace(" ", "")
    if not _is_valid(formula):
        raise Exception("invalid formula")
    return _reduce(_tokens(formula))


@LEVEL3.register
class Calculator(InlineApi):
    def call(self, formula: str) -> float:
        return self.respond({"formula": formula}, lambda: calculate(formula))

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Spaces in the formula are ignored; output and exception must be equal.
        same_formula = response["input"]["formula"].replace(" ", "") == groundtruth["input"]["formula"].replace(" ", "")
        return same_formula and response["output"] == groundtruth["output"] and response["exception"] == groundtruth["exception"]
