"""The Calculator's evaluator: upstream's list rewrite, reproduced in one sweep per pass."""

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apibank_bench.apis.arithmetic import calculate

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def rewrite(tokens):
    """The specification: upstream's rewrite, searching the list again after every step."""
    while "(" in tokens:
        start, end = tokens.index("("), tokens.index(")")
        tokens[start : end + 1] = [rewrite(tokens[start + 1 : end])]
    for ops in (("*", "/"), ("+", "-")):
        while any(op in tokens for op in ops):
            at = min(tokens.index(op) for op in ops if op in tokens)
            value = OPS[tokens[at]](tokens[at - 1], tokens[at + 1])
            if at == 0:  # upstream loops for ever here; we answer 'invalid formula'
                raise Exception("invalid formula")
            tokens[at - 1 : at + 2] = [value]
    return tokens[0]


def specified(formula):
    from apibank_bench.apis.arithmetic import _is_valid, _tokens

    formula = formula.replace(" ", "")
    if not _is_valid(formula):
        raise Exception("invalid formula")
    return rewrite(_tokens(formula))


def outcome(function, formula):
    try:
        return "value", repr(function(formula))  # repr: nan equals nan
    except Exception as exc:  # the API reports str(exc); the type is compared too
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(
    "formula, expected",
    [
        ("1 + 2 * 3", ("value", "7.0")),
        ("(1+2)*3", ("value", "9.0")),
        ("(1)(2)+3", ("value", "1.0")),  # numbers side by side: the first one wins
        ("1/0", ("ZeroDivisionError", "float division by zero")),
        ("((1+2))", ("ValueError", "')' is not in list")),
        (")1+2(", ("IndexError", "list index out of range")),
        ("1+*2", ("TypeError", "can't multiply sequence by non-int of type 'float'")),  # '*' first: '+' * 2.0
        ("1*2+-3", ("TypeError", "unsupported operand type(s) for +: 'float' and 'str'")),
        ("-3+2", ("Exception", "invalid formula")),  # upstream loops for ever
        ("2*(-3)", ("Exception", "invalid formula")),
        ("1+a", ("Exception", "invalid formula")),
        ("12", ("Exception", "invalid formula")),
    ],
)
def test_examples(formula, expected):
    assert outcome(calculate, formula) == expected
    assert outcome(specified, formula) == expected


def test_a_long_formula_is_evaluated_whole():
    # 1 + 2*3 - 1 + 2*3 - ... - 1: the first 1, 6000 products of 6, 6000 subtracted ones.
    assert calculate("1+2*3-" * 6000 + "1") == 1 + 6 * 6000 - 6000
    assert calculate("(1+2)*" * 5000 + "1") == float("inf")  # float products overflow to inf, not an error


tokens = st.sampled_from(["1", "2", "0", "7", "12", "+", "-", "*", "/", "(", ")", " ", "()", "(3)", "(1+2)", "9" * 330])


@settings(max_examples=1500, deadline=None)
@given(st.lists(tokens, max_size=30).map("".join))
def test_same_as_upstreams_rewrite(formula):
    assert outcome(calculate, formula) == outcome(specified, formula)
