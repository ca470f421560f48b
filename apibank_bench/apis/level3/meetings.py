"""Level 3: meetings (AddMeeting, QueryMeeting, EmailReminder)."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi, assert_same_api, fields_equal

_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@LEVEL3.register_api
class AddMeeting(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database: list = []

    @enveloped
    def call(self, meeting_topic: str, start_time: str, end_time: str, location: str,
             attendees: list) -> str:
        # Both times must parse (strptime's error text is the exception) before the topic is checked.
        datetime.datetime.strptime(start_time, _TIME_FORMAT)
        datetime.datetime.strptime(end_time, _TIME_FORMAT)
        if meeting_topic.strip() == "":
            raise Exception("Meeting Topic should not be null")
        self.database.append({"meeting_topic": meeting_topic, "start_time": start_time, "end_time": end_time,
                              "location": location, "attendees": attendees})  # a copy of the input
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirks: no API-name assertion; the topic is matched by word overlap and then
        # popped from both inputs (the caller's dicts are mutated).
        # (Split inline rather than via words_overlap: the response topic is split before
        # the ground truth's is even looked up, which decides the error on bad input.)
        got = set(response["input"]["meeting_topic"].split(" "))
        want = set(groundtruth["input"]["meeting_topic"].split(" "))
        topic_ok = len(got & want) / len(got | want) > 0.5
        response["input"].pop("meeting_topic")
        groundtruth["input"].pop("meeting_topic")
        return topic_ok and fields_equal(response, groundtruth, "input", "output", "exception")


def _calendars() -> dict:
    """A fresh calendar per user (every user gets their own meeting dicts)."""

    def meeting(meeting_id: int, name: str, day: int, room: str, attendees: list) -> dict:
        return {
            "meeting_id": meeting_id,
            "meeting_name": name,
            "meeting_time": f"2021-01-{day:02d} 10:00:00",
            "meeting_location": room,
            "meeting_attendees": list(attendees),
        }

    def project_team() -> list:
        team = ["John", "Mary", "Peter"]
        return [meeting(1, "Meeting with the client", 1, "Room 1", team),
                meeting(2, "Meeting about the new project", 2, "Room 2", team)]

    def pair() -> list:
        return [meeting(1, "Meeting", 1, "Room 1", ["Tom", "Jerry"])]

    return {"John": project_team(), "Mary": project_team(), "Peter": project_team(),
            "Tom": pair(), "Jerry": pair()}


@LEVEL3.register_api
class QueryMeeting(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.database = _calendars()

    @enveloped
    def call(self, user_name):
        return {"meetings": self.database[user_name]}


@LEVEL3.register_api
class EmailReminder(InlineApi):
    @enveloped
    def call(self, content: str, time: str, location: str, recipient: str) -> str:
        datetime.datetime.strptime(time, _TIME_FORMAT)
        if content.strip() == "":
            raise Exception("Content should not be empty")
        return "success"  # nothing is actually sent

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: the content is ignored: popped from both inputs (mutating them).
        assert_same_api(response, groundtruth)
        response["input"].pop("content")
        groundtruth["input"].pop("content")
        return fields_equal(response, groundtruth, "output", "exception", "input")
