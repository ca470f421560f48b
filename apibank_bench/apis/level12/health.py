"""Health records (database `HealthData`) and symptom look-ups (database `Symptom`)."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, DatabaseApi, canonical_time, enveloped, parse_padded

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _user_id(user_id):
    """Upper-cased, stripped id; None when empty."""
    user_id = user_id.upper().strip()
    return None if user_id == "" else user_id


def _raise_if_error(value):
    if isinstance(value, Exception):
        raise value
    return value


@LEVEL12.register_api
class RecordHealthData(DatabaseApi):
    @enveloped
    def call(self, user_id: str, time: str, health_data: list | None = None) -> str:
        user_id = _user_id(user_id)
        if user_id is None:
            raise Exception("The user id cannot be empty.")
        time = _raise_if_error(canonical_time(time, TIME_FORMAT))
        if health_data is None or len(health_data) == 0:
            raise Exception("The health data cannot be empty.")
        names = set()
        for item in health_data:
            if "name" not in item:
                raise Exception("The health data has invalid format.")
            if item["name"] in names:
                raise Exception("The health data cannot contain duplicate items.")
            names.add(item["name"])
        # The user's list is created before any 'value' is read, so a missing
        # 'value' (KeyError) still leaves an empty list behind, as upstream.
        records = self.database.setdefault(user_id, [])
        same_time = [record for record in records if record["time"] == time]
        if same_time:
            target = same_time[-1]  # the last record at that time gets updated
            for item in health_data:
                target[item["name"]] = item["value"]
        else:
            record = {"time": time}
            for item in health_data:
                record[item["name"]] = item["value"]
            records.append(record)
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk kept: only the response's id goes through str(); health_data is not compared.
        response_id = str(response["input"]["user_id"])
        groundtruth_id = groundtruth["input"]["user_id"]
        response_time, groundtruth_time = response["input"]["time"], groundtruth["input"]["time"]
        for result in (response, groundtruth):
            result["input"]["health_data"]  # noqa: B018 - read (not compared) as upstream does: a missing key raises
        response_id, groundtruth_id = response_id.upper().strip(), groundtruth_id.upper().strip()
        response_time = canonical_time(response_time, TIME_FORMAT)
        groundtruth_time = canonical_time(groundtruth_time, TIME_FORMAT)
        return (
            response_id == groundtruth_id
            and response_time == groundtruth_time
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class QueryHealthData(DatabaseApi):
    @staticmethod
    def _normalized(user_id, start_time, end_time):
        """(id or None, start, end); the times are datetimes or the parse exceptions."""
        user_id = _user_id(user_id)
        return user_id, parse_padded(start_time, TIME_FORMAT), parse_padded(end_time, TIME_FORMAT)

    @enveloped
    def call(self, user_id, start_time, end_time) -> list:
        user_id, start, end = self._normalized(user_id, start_time, end_time)
        if user_id is None:
            raise Exception("The user id cannot be empty.")
        if isinstance(start, Exception) and isinstance(end, Exception):
            raise Exception(f"{start}; {end}")
        _raise_if_error(start)
        _raise_if_error(end)
        if start > end:
            raise Exception("The start time cannot be later than the end time.")
        if user_id not in self.database:
            raise Exception("The user id does not exist.")
        found = [
            record
            for record in self.database[user_id]
            if start <= datetime.datetime.strptime(record["time"], TIME_FORMAT) <= end
        ]
        if not found:
            raise Exception("There is no health data in the given time span.")
        return found

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        keys = ("user_id", "start_time", "end_time")
        response_args = [response["input"][key] for key in keys]
        groundtruth_args = [groundtruth["input"][key] for key in keys]
        mine, gold = self._normalized(*response_args), self._normalized(*groundtruth_args)
        # Field by field: unparsable times are exception objects and never match.
        if any(a != b for a, b in zip(mine, gold)):
            return False
        return response["output"] == groundtruth["output"] and response["exception"] == groundtruth["exception"]


def _symptom_results(database, key, fields):
    if key not in database:
        raise Exception("The symptom does not exist.")
    return [{field: item[field] for field in fields} for item in database[key]]


def _symptom_check(key, response, groundtruth) -> bool:
    response_symptom, groundtruth_symptom = response["input"]["symptom"], groundtruth["input"]["symptom"]
    return (
        key(response_symptom) == key(groundtruth_symptom)
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


def _symptom_key(symptom) -> str:
    symptom = symptom.strip().lower()
    if symptom == "":
        raise Exception("The symptom cannot be empty.")
    return symptom


def _emergency_key(symptom) -> str:
    symptom = symptom.strip()
    if symptom == "":
        # Quirk kept: upstream puts an Exception in place of the text and then
        # lowercases it, so an empty symptom fails with an AttributeError message.
        symptom = Exception("The symptom cannot be empty.")
    return symptom.lower()


@LEVEL12.register_api
class SymptomSearch(DatabaseApi):
    @enveloped
    def call(self, symptom: str) -> list:
        return _symptom_results(self.database, _symptom_key(symptom), ("name", "description"))

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _symptom_check(_symptom_key, response, groundtruth)


@LEVEL12.register_api
class EmergencyKnowledge(DatabaseApi):
    @enveloped
    def call(self, symptom: str) -> list:
        return _symptom_results(self.database, _emergency_key(symptom), ("name", "aid"))

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _symptom_check(_emergency_key, response, groundtruth)
