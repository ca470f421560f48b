"""Level 3: an organization's members and where they are (OrganizationMembers, TravelStatus)."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi


@LEVEL3.register_api
class OrganizationMembers(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = {
            "Alibaba": ["John", "Mary", "Peter"],
            "Tencent": ["Tom", "Jerry"],
            "Baidu": ["Jack", "Rose"],
            "ByteDance": ["Bob", "Alice"],
            "JD": ["Mike", "Jane"],
        }

    @enveloped
    def call(self, organization: str) -> dict:
        # An unknown organization fails with the KeyError's text, e.g. "'Google'".
        return {"members": self.database[organization]}


@LEVEL3.register_api
class TravelStatus(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = {
            "John": "Traveling",
            "Mary": "Working from home",
            "Peter": "Working from office",
            "Tom": "Traveling",
            "Jerry": "Working from home",
            "Jack": "Working from office",
            "Rose": "Working from office",
            "Bob": "Traveling",
            "Alice": "Working from home",
            "Mike": "Working from office",
            "Jane": "Working from office",
        }

    @enveloped
    def call(self, member_name: str) -> str:
        # The output is the bare status string, not a dict.
        return self.database[member_name]
