"""Level 3: user accounts (AccountInfo, PersonalInfoUpdate)."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi, assert_same_api, fields_equal


def _accounts() -> list:
    """A fresh account table: ((username, password), contact details)."""
    return [
        (("John", "123456"), {"email": "john@example.com", "phone": "1234567890"}),
        (("Mary", "abcdef"), {"email": "mary@example.com", "phone": "0987654321"}),
        (("Peter", "qwerty"), {"email": "peter@example.com", "phone": "1231231234"}),
        (("Tom", "asdfgh"), {"email": "tom@example.com", "phone": "4564564567"}),
        (("Jerry", "zxcvbn"), {"email": "jerry@example.com", "phone": "7897897890"}),
    ]


def _account(accounts: list, username, password) -> dict:
    for (user, pwd), details in accounts:
        if user == username and pwd == password:
            return details
    raise Exception("User not found.")


@LEVEL3.register_api
class AccountInfo(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = _accounts()

    @enveloped
    def call(self, username: str, password: str) -> dict:
        # The output is the stored details dict itself (not a copy), as upstream.
        return _account(self.database, username, password)


@LEVEL3.register_api
class PersonalInfoUpdate(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = _accounts()

    @enveloped
    def call(self, username: str, password: str, address: dict) -> dict:
        _account(self.database, username, password)["address"] = address
        return {"status": "success"}

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: the exception field is not compared.
        assert_same_api(response, groundtruth)
        return fields_equal(response, groundtruth, "input", "output")
