"""Alarm clocks (database "Alarm"): one time per item, per user."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _check_time(time) -> None:
    """Raise strptime's own ValueError/TypeError when `time` is not in TIME_FORMAT."""
    datetime.datetime.strptime(time, TIME_FORMAT)


def _find(database, username, time):
    """Key of the user's first alarm at this time, else None."""
    for key, item in database.items():
        if item["username"] == username and item["time"] == time:
            return key
    return None


def _locate(api, token, time):
    """Delete and Query alike: check the time and the token, then find the user's alarm."""
    _check_time(time)
    username = api.token_checker.check_token(token)
    key = _find(api.database, username, time)
    if key is None:
        # (upstream guards this with `if time`, always true once the format check passed)
        raise Exception(f"You have no alarm clock at time : {time}")
    return key


# Each class defines its own `call`: a missing-argument TypeError names it.
@LEVEL12.register_api
class AddAlarm(Api):
    @enveloped
    def call(self, token, time):
        _check_time(time)
        # Quirk: the new key is the int len+1 (the initial keys are strings), so an
        # add after a delete can overwrite an earlier added alarm.
        key = len(self.database) + 1
        username = self.token_checker.check_token(token)
        self.database[key] = {"username": username, "time": time}
        return "success"


@LEVEL12.register_api
class DeleteAlarm(Api):
    @enveloped
    def call(self, token, time):
        key = _locate(self, token, time)
        del self.database[key]
        return "success"


@LEVEL12.register_api
class ModifyAlarm(Api):
    @enveloped
    def call(self, token, from_time, to_time):
        _check_time(from_time)
        _check_time(to_time)
        username = self.token_checker.check_token(token)
        key = _find(self.database, username, from_time)
        if key is None:
            raise Exception(f"You have no agenda at time : {from_time}")  # quirk: says "agenda"
        self.database[key] = {"username": username, "time": to_time}
        return "success"


@LEVEL12.register_api
class QueryAlarm(Api):
    @enveloped
    def call(self, token, time):
        key = _locate(self, token, time)
        return self.database[key]  # the stored item itself, as upstream returns it
