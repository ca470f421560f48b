"""What the Level-3 APIs share.

Level 3's APIs keep their tables inside the instance (nothing comes from
`init_database/`), so their constructors take no arguments, and most of their
checks compare whole envelope fields in a fixed order.
"""

from __future__ import annotations

from apibank_bench.apis.base import Api


class InlineApi(Api):
    """A Level-3 API: built with no arguments, its data set up in `__init__`."""

    def __init__(self) -> None:
        super().__init__()

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        """Upstream's check of most Level-3 APIs (`exact_check`); an API with another overrides it."""
        return exact_check(response, groundtruth)


def assert_same_api(response: dict, groundtruth: dict) -> None:
    assert response["api_name"] == groundtruth["api_name"], "The API name is not correct."


def fields_equal(response: dict, groundtruth: dict, *fields: str) -> bool:
    """The named envelope fields are equal, compared in the given order (it decides
    which KeyError a malformed ground truth raises)."""
    return all(response[field] == groundtruth[field] for field in fields)


def exact_check(response: dict, groundtruth: dict) -> bool:
    """The check most Level-3 APIs use: same API, then output, exception, input equal."""
    assert_same_api(response, groundtruth)
    return fields_equal(response, groundtruth, "output", "exception", "input")
