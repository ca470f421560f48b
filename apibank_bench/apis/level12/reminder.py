"""Reminders (database "Reminder"): content and time per user."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped, same_time_or_result, words_overlap

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _check(time, content) -> None:
    """The checks every reminder API starts with: time format, then non-blank content."""
    datetime.datetime.strptime(time, TIME_FORMAT)
    if content.strip() == "":
        raise Exception("Content should not be null")


def _find(database, username, content, time):
    """Key of the user's first reminder with this content or this time, else None."""
    for key, item in database.items():
        if item["username"] == username and (item["content"] == content or item["time"] == time):
            return key
    return None


def _locate(api, token, content, time):
    """Delete, Modify and Query alike: check the input and the token, then find the user's reminder."""
    _check(time, content)
    username = api.token_checker.check_token(token)
    key = _find(api.database, username, content, time)
    if key is None:
        raise Exception(f"You have no reminder about {content} or at time : {time}")
    return key


def _same_reminder(response, groundtruth) -> bool:
    """Content by word overlap (case-insensitive), then time, output, exception."""
    return (
        words_overlap(response["input"]["content"].lower(), groundtruth["input"]["content"].lower())
        and response["input"]["time"] == groundtruth["input"]["time"]
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


# Each class defines its own `call`: a missing-argument TypeError names it.
@LEVEL12.register_api
class AddReminder(Api):
    @enveloped
    def call(self, token, content, time):
        _check(time, content)
        # Quirk: unlike agenda/alarm, the new key is str(max numeric key + 1), "0" if empty.
        key = str(max(int(k) for k in self.database) + 1) if self.database else "0"
        username = self.token_checker.check_token(token)
        self.database[key] = {"username": username, "content": content, "time": time}
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        assert response["api_name"] == groundtruth["api_name"], "The API name is not correct."
        return _same_reminder(response, groundtruth)


@LEVEL12.register_api
class DeleteReminder(Api):
    @enveloped
    def call(self, token, content, time):
        key = _locate(self, token, content, time)
        del self.database[key]
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        return same_time_or_result(response, groundtruth)


@LEVEL12.register_api
class ModifyReminder(Api):
    @enveloped
    def call(self, token, content, time):
        key = _locate(self, token, content, time)
        # Updated in place (a dict returned earlier by a query sees the change).
        self.database[key]["content"] = content
        self.database[key]["time"] = time
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        assert response["api_name"] == groundtruth["api_name"], "The API name is not correct."
        return _same_reminder(response, groundtruth)


@LEVEL12.register_api
class QueryReminder(Api):
    @enveloped
    def call(self, token, content, time):
        key = _locate(self, token, content, time)
        return self.database[key]  # the stored item itself, as upstream returns it

    def check_api_call_correctness(self, response, groundtruth):
        return _same_reminder(response, groundtruth)
