"""The Calculator's formula evaluator, a left-to-right arithmetic reducer (never eval), shared by the
Level-1/2 and Level-3 Calculator APIs (upstream's two are the same).

Upstream's calculator does not use Python's parser: it turns the formula
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

_ALLOWED = set("0123456789+-*/()")
_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_TOKEN = re.compile(r"[0-9]+|.")  # a run of digits, or any single character
_PASSES = (("*", "/"), ("+", "-"))  # one pass per precedence level


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


def _fold(tokens: list, ops: tuple[str, str]) -> list:
    """One pass: apply the leftmost operator in `ops` until none is left, in one sweep.

    Upstream searches the whole list again after every operation (quadratic); as
    the leftmost operator's result lands where its left operand was, a single
    left-to-right sweep applies the same operations to the same operands.
    """
    done: list = []  # the tokens left of the sweep, already rewritten
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token not in ops:
            done.append(token)
            index += 1
        elif not done:
            # A leading operator: upstream's left operand is the list's *last* token,
            # and its rewrite then keeps the operator for ever (see the module doc).
            _OPERATORS[token](tokens[-1], tokens[1])
            raise Exception("invalid formula")
        else:
            done[-1] = _OPERATORS[token](done[-1], tokens[index + 1])
            index += 2
    return done


def _evaluate(tokens: list):
    """A formula without parentheses: `*` and `/` first, then `+` and `-`; the first token wins."""
    for ops in _PASSES:
        tokens = _fold(tokens, ops)
    return tokens[0]


def _reduce(tokens: list):
    """Replace each '(' ... ')' group by its value, left to right, then evaluate.

    Upstream pairs the first '(' with the first ')', so a ')' before any '(' is
    an empty group (IndexError) and a '(' inside a group fails to find its ')'.
    """
    flat: list = []
    group: list | None = None
    for token in tokens:
        if token == "(":
            if group is not None:
                raise ValueError("')' is not in list")
            group = []
        elif token == ")":
            if group is None:
                raise IndexError("list index out of range")
            flat.append(_evaluate(group))
            group = None
        else:
            (flat if group is None else group).append(token)
    return _evaluate(flat)


def calculate(formula: str):
    formula = formula.replace(" ", "")
    if not _is_valid(formula):
        raise Exception("invalid formula")
    return _reduce(_tokens(formula))
