"""Agenda items (database "Agenda"): content, time and location per user."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped, same_time_or_result, words_overlap

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _check_time(time) -> None:
    """Raise strptime's own ValueError/TypeError when `time` is not in TIME_FORMAT."""
    datetime.datetime.strptime(time, TIME_FORMAT)


def _find(database, username, content, time):
    """Key of the user's first item with this content or this time, else None."""
    for key, item in database.items():
        if item["username"] == username and (item["content"] == content or item["time"] == time):
            return key
    return None


def _lookup(api, token, content, time):
    """Delete, Modify and Query alike: check the time and the token, then find the user's item."""
    if time:  # quirk: an empty time skips the format check
        _check_time(time)
    username = api.token_checker.check_token(token)
    return username, _find(api.database, username, content, time)


def _raise_missing(noun, content, time) -> None:
    """The not-found error, naming the content if given, else the time (none if both are empty)."""
    if content:
        raise Exception(f"You have no {noun} about {content}")
    if time:
        raise Exception(f"You have no {noun} at time : {time}")


def _same_agenda(response, groundtruth) -> bool:
    """Content by word overlap (case-sensitive), then time, location, output, exception."""
    return (
        words_overlap(response["input"]["content"], groundtruth["input"]["content"])
        and response["input"]["time"] == groundtruth["input"]["time"]
        and response["input"]["location"] == groundtruth["input"]["location"]
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


# Each class defines its own `call`: a missing-argument TypeError names it.
@LEVEL12.register_api
class AddAgenda(Api):
    @enveloped
    def call(self, token, content, time, location):
        _check_time(time)
        if content.strip() == "":
            raise Exception("Content should not be null")
        # Quirk: the new key is the int len+1 (the initial keys are strings), so an
        # add after a delete can overwrite an earlier added item.
        key = len(self.database) + 1
        username = self.token_checker.check_token(token)
        self.database[key] = {"username": username, "content": content, "time": time, "location": location}
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        assert response["api_name"] == groundtruth["api_name"], "The API name is not correct."
        return _same_agenda(response, groundtruth)


@LEVEL12.register_api
class DeleteAgenda(Api):
    @enveloped
    def call(self, token, content, time, location):
        username, key = _lookup(self, token, content, time)
        if key is not None:
            del self.database[key]
            return "success"
        # Quirk: the messages say "meeting"; with empty content and time, nothing
        # deleted still reports success.
        _raise_missing("meeting", content, time)
        return "success"

    def check_api_call_correctness(self, response, groundtruth):
        return same_time_or_result(response, groundtruth)


@LEVEL12.register_api
class ModifyAgenda(Api):
    @enveloped
    def call(self, token, content, time, location):
        username, key = _lookup(self, token, content, time)
        if key is not None:
            self.database[key] = {"username": username, "content": content, "time": time, "location": location}
            return "success"
        _raise_missing("agenda", content, time)
        # Quirk: returned, not raised: the output is an Exception object.
        return Exception("Error")

    def check_api_call_correctness(self, response, groundtruth):
        return _same_agenda(response, groundtruth)


@LEVEL12.register_api
class QueryAgenda(Api):
    @enveloped
    def call(self, token, content, time, location):
        username, key = _lookup(self, token, content, time)
        if key is not None:
            return self.database[key]  # the stored item itself, as upstream returns it
        _raise_missing("agenda", content, time)
        raise Exception("Error")

    def check_api_call_correctness(self, response, groundtruth):
        return _same_agenda(response, groundtruth)
