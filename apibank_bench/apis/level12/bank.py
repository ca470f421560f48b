"""Banking and stocks: OpenBankAccount (its own table), QueryBalance ("Bank"), QueryStock ("Stock")."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped

DATE_FORMAT = "%Y-%m-%d"


@LEVEL12.register_api
class OpenBankAccount(Api):
    # Upstream has no database in init_database/: it starts from one built-in account.
    def __init__(self) -> None:
        super().__init__({0: {"account": "test", "password": "test", "name": "yifei"}})

    @enveloped
    def call(self, account, password, name):
        return self.open(account, password, name)

    def open(self, account, password, name) -> str:
        if any(item["account"] == account for item in self.database.values()):
            return "failed"  # quirk: a taken account is an output, not an exception
        self.database[len(self.database) + 1] = {"account": account, "password": password, "name": name}
        return "success"


@LEVEL12.register_api
class QueryBalance(Api):
    def __init__(self, init_database=None, token_checker=None) -> None:
        super().__init__(init_database, token_checker)
        assert token_checker is not None

    @enveloped
    def call(self, token):
        try:
            # Quirk: the token is checked unstripped; strip() only turns a
            # non-string token into 'The token is incorrect.'.
            token.strip()
            username = self.token_checker.check_token(token)
        except Exception:
            raise Exception("The token is incorrect.") from None
        if username not in self.database:
            raise Exception("The user does not have an account.")
        return self.database[username]["balance"]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        same_token = response["input"]["token"].strip() == groundtruth["input"]["token"].strip()
        ours, theirs = response["output"], groundtruth["output"]  # read before comparing, as upstream
        return same_token and ours == theirs and response["exception"] == groundtruth["exception"]


def _stock_date(date):
    """The date as %Y-%m-%d, a short year zero-padded (22-3-1 -> 0022-03-01), or the
    ValueError strptime raised: upstream returns the error instead of raising it."""
    date = date.strip()
    parts = date.split("-")
    if len(parts) == 3:
        date = "-".join([parts[0].zfill(4)] + parts[1:])
    try:
        parsed = datetime.datetime.strptime(date, DATE_FORMAT)
    except Exception as error:
        return error
    return parsed.strftime(DATE_FORMAT)


def _stock_query(stock_code, date):
    """Upstream's normalisation: (upper-cased code or None when blank, date or error).

    Quirk: errors compare by identity, so two malformed dates never match in the check.
    """
    stock_code = stock_code.upper().strip()
    return (None if stock_code == "" else stock_code), _stock_date(date)


@LEVEL12.register_api
class QueryStock(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, stock_code, date):
        stock_code, date = _stock_query(stock_code, date)
        if stock_code is None:
            raise Exception("The stock code cannot be empty.")
        if isinstance(date, Exception):
            raise date
        if stock_code not in self.database:
            raise Exception("The stock code does not exist.")
        if date not in self.database[stock_code]:
            raise Exception("The stock price of this date is not maintained.")
        return self.database[stock_code][date]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # All four fields are read before either side is normalised, as upstream.
        ours = response["input"]["stock_code"], response["input"]["date"]
        theirs = groundtruth["input"]["stock_code"], groundtruth["input"]["date"]
        ours, theirs = _stock_query(*ours), _stock_query(*theirs)
        return (
            ours[0] == theirs[0]
            and ours[1] == theirs[1]
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )
