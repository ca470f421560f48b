"""Meeting reservations (database `Meeting`), each owned by the token's user."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped, same_result, words_overlap

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


class _MeetingApi(Api):
    """Shared lookup and check of the four meeting APIs."""

    def _validate_lookup(self, meeting_topic, start_time, end_time) -> None:
        # Delete/Modify/Query: times are optional but must parse when given.
        if start_time:
            datetime.datetime.strptime(start_time, TIME_FORMAT)
        if end_time:
            datetime.datetime.strptime(end_time, TIME_FORMAT)
        if meeting_topic.strip() == "" and not start_time:
            raise Exception("Meeting Topic and start_time should not be null both")

    def _find(self, username, meeting_topic, start_time):
        """Key of the user's first meeting with this topic or this start time."""
        for key, meeting in self.database.items():
            if meeting["username"] == username and (
                meeting["meeting_topic"] == meeting_topic or meeting["start_time"] == start_time
            ):
                return key
        return None

    @staticmethod
    def _not_found(meeting_topic, start_time) -> None:
        if meeting_topic:
            raise Exception(f"You have no meeting about {meeting_topic}")
        if start_time:
            raise Exception(f"You have no meeting at time : {start_time}")

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Topic: fuzzy word overlap; then the topic is popped from both inputs
        # (mutating them, as upstream does) and everything else must be equal.
        topic_ok = words_overlap(response["input"]["meeting_topic"], groundtruth["input"]["meeting_topic"])
        response["input"].pop("meeting_topic")
        groundtruth["input"].pop("meeting_topic")
        return bool(
            topic_ok
            and response["input"] == groundtruth["input"]
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class AddMeeting(_MeetingApi):
    @enveloped
    def call(self, token: str, meeting_topic: str, start_time: str, end_time: str, location: str,
             attendees: list) -> str:
        datetime.datetime.strptime(start_time, TIME_FORMAT)
        datetime.datetime.strptime(end_time, TIME_FORMAT)
        if meeting_topic.strip() == "":
            raise Exception("Meeting Topic should not be null")
        new_id = max(int(key) for key in self.database) + 1 if self.database else 0
        username = self.token_checker.check_token(token)
        self.database[str(new_id)] = {
            "username": username,
            "meeting_topic": meeting_topic,
            "start_time": start_time,
            "end_time": end_time,
            "location": location,
            "attendees": attendees,
        }
        return "success"


@LEVEL12.register_api
class DeleteMeeting(_MeetingApi):
    @enveloped
    def call(self, token: str, meeting_topic: str, start_time: str, end_time: str, location: str,
             attendees: list) -> dict:
        return self._delete(token, meeting_topic, start_time, end_time)

    def _delete(self, token, meeting_topic, start_time, end_time):
        self._validate_lookup(meeting_topic, start_time, end_time)
        key = self._find(self.token_checker.check_token(token), meeting_topic, start_time)
        if key is None:
            self._not_found(meeting_topic, start_time)
        else:
            del self.database[key]
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        if groundtruth["output"] == "success" and response["output"] == "success":
            # Quirk kept: reads input key 'time', which no meeting call has, so two
            # successful deletions raise KeyError('time') instead of a verdict.
            return bool(response["input"]["time"] == groundtruth["input"]["time"])
        return same_result(response, groundtruth)


@LEVEL12.register_api
class ModifyMeeting(_MeetingApi):
    @enveloped
    def call(self, token: str, meeting_topic: str, start_time: str, end_time: str, location: str,
             attendees: list) -> dict:
        return self._modify(token, meeting_topic, start_time, end_time)

    def _modify(self, token, meeting_topic, start_time, end_time):
        self._validate_lookup(meeting_topic, start_time, end_time)
        key = self._find(self.token_checker.check_token(token), meeting_topic, start_time)
        if key is None:
            self._not_found(meeting_topic, start_time)
            return "success"
        # Only topic and times can change (location and attendees are ignored).
        meeting = self.database[key]
        if meeting_topic:
            meeting["meeting_topic"] = meeting_topic
        if start_time:
            meeting["start_time"] = start_time
            meeting["end_time"] = end_time
        return "success"


@LEVEL12.register_api
class QueryMeeting(_MeetingApi):
    @enveloped
    def call(self, token: str, meeting_topic: str, start_time: str, end_time: str, location: str,
             attendees: list) -> dict:
        return self._query(token, meeting_topic, start_time, end_time)

    def _query(self, token, meeting_topic, start_time, end_time):
        self._validate_lookup(meeting_topic, start_time, end_time)
        key = self._find(self.token_checker.check_token(token), meeting_topic, start_time)
        if key is not None:
            return self.database[key]  # the stored dict itself, as upstream
        self._not_found(meeting_topic, start_time)
        # Quirk kept (unreachable for str topics): upstream *returns* an exception object as output.
        return Exception("Error")
