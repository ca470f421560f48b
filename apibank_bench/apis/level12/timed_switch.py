"""Timed switches of smart devices (database `TimeSwitch`): device -> list of {time, on}."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL12, DatabaseApi, canonical_time, enveloped

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _device_and_time(name, time, empty_name_message):
    name = name.strip().lower()
    if name == "":
        raise Exception(empty_name_message)
    time = canonical_time(time, TIME_FORMAT)
    if isinstance(time, Exception):
        raise time
    return name, time


def _same_switch(response, groundtruth, with_on: bool) -> bool:
    """Names (stripped, lower-cased), times (canonical), `on` if asked, output and exception equal."""
    response_name, groundtruth_name = response["input"]["name"], groundtruth["input"]["name"]
    response_time, groundtruth_time = response["input"]["time"], groundtruth["input"]["time"]
    if with_on:
        response_on, groundtruth_on = response["input"]["on"], groundtruth["input"]["on"]
    response_name, groundtruth_name = response_name.strip().lower(), groundtruth_name.strip().lower()
    response_time = canonical_time(response_time, TIME_FORMAT)
    groundtruth_time = canonical_time(groundtruth_time, TIME_FORMAT)
    return (
        response_name == groundtruth_name
        and response_time == groundtruth_time  # unparsable times (exception objects) never match
        and (not with_on or response_on == groundtruth_on)
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


@LEVEL12.register_api
class TimedSwitch(DatabaseApi):
    @enveloped
    def call(self, name: str, time: str, on: bool) -> str:
        name, time = _device_and_time(name, time, "Name cannot be empty.")
        switches = self.database.setdefault(name, [])
        for switch in switches:
            if switch["time"] == time:
                switch["on"] = on
                return "success"
        switches.append({"time": time, "on": on})
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _same_switch(response, groundtruth, with_on=True)


@LEVEL12.register_api
class CancelTimedSwitch(DatabaseApi):
    @enveloped
    def call(self, name: str, time: str) -> str:
        name, time = _device_and_time(name, time, "name cannot be empty.")
        if name not in self.database:
            raise Exception("device name does not exist.")
        switches = self.database[name]
        for index, switch in enumerate(switches):
            if switch["time"] == time:
                switches.pop(index)
                return "success"
        raise Exception("time does not exist.")

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return _same_switch(response, groundtruth, with_on=False)
