"""The API envelope, written once (`apis.base.enveloped`): what the conformance test against upstream does not
single out."""

from __future__ import annotations

import pytest

from apibank_bench.apis import api_classes
from apibank_bench.apis.base import Api, enveloped
from apibank_bench.apis.search.model import ModelUnavailable
from apibank_bench.data import specs


class Echo(Api):
    @enveloped
    def call(self, first, second="two", **rest):
        if first == "fail":
            raise Exception("it failed")
        return [first, second, rest]


def test_the_input_is_the_arguments_by_name_with_defaults_and_keywords_spread_in_order():
    response = Echo().call("one", extra=3)
    assert response == {"api_name": "Echo", "input": {"first": "one", "second": "two", "extra": 3},
                        "output": ["one", "two", {"extra": 3}], "exception": None}
    assert list(response["input"]) == ["first", "second", "extra"]
    failed = Echo().call(second=2, first="fail")
    assert list(failed["input"]) == ["first", "second"]  # the signature's order, not the caller's
    assert failed["output"] is None and failed["exception"] == "it failed"


def test_arguments_that_do_not_fit_raise_pythons_own_error_naming_the_api():
    with pytest.raises(TypeError, match=r"AddAlarm\.call\(\) missing 1 required positional argument: 'time'"):
        api_classes(specs.LEVEL12)["AddAlarm"]().call(token="t")


def test_a_missing_search_model_is_raised_not_enveloped():
    searcher = api_classes(specs.LEVEL12)["ToolSearcher"].__new__(api_classes(specs.LEVEL12)["ToolSearcher"])

    class Unavailable:
        def best(self, keywords):
            raise ModelUnavailable("no model here")

    searcher.catalog = Unavailable()
    with pytest.raises(ModelUnavailable, match="no model here"):
        searcher.call(keywords="alarm")
