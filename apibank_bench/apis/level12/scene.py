"""Smart-home scenes (database `Scenes`): scene name -> list of devices."""

from __future__ import annotations

from itertools import chain

from apibank_bench.core.frozen import FrozenDict, FrozenList, thaw
from apibank_bench.apis.base import LEVEL12, DatabaseApi, enveloped


def _scene_name(name) -> str:
    name = name.strip().lower()
    if name == "":
        raise Exception("Scene name cannot be empty.")
    return name


def _normalize_devices(devices) -> None:
    """Validate and normalize the device list *in place* (upstream mutates the caller's list,
    so the envelope's input and the stored scene show the normalized devices)."""
    seen = set()
    for device in devices:
        if "name" not in device or "description" not in device:
            raise Exception("Invalid device format.")
        device["name"] = device["name"].strip().lower()
        device["description"] = device["description"].strip()
        if device["name"] in seen:
            raise Exception("Device name cannot be duplicated.")
        seen.add(device["name"])
    devices.sort(key=lambda device: device["name"])


def _mutable(devices):
    # Replayed task parameters are read-only; upstream works on a plain, mutable list.
    return thaw(devices) if isinstance(devices, (FrozenList, FrozenDict)) else devices


def _same_scene(response, groundtruth) -> bool:
    """Add/Modify check: normalized names and devices equal (both inputs are mutated)."""
    response_name, response_devices = response["input"]["name"], response["input"]["devices"]
    groundtruth_name, groundtruth_devices = groundtruth["input"]["name"], groundtruth["input"]["devices"]
    response_name = response_name.strip().lower()
    groundtruth_name = groundtruth_name.strip().lower()
    for device in chain(response_devices, groundtruth_devices):
        device["name"] = device["name"].strip().lower()
        device["description"] = device["description"].strip()
    response_devices.sort(key=lambda device: device["name"])
    groundtruth_devices.sort(key=lambda device: device["name"])
    return response_name == groundtruth_name and response_devices == groundtruth_devices


@LEVEL12.register_api
class AddScene(DatabaseApi):
    def call(self, name: str, devices: list) -> dict:
        devices = _mutable(devices)
        return self.respond({"name": name, "devices": devices}, lambda: self._add(name, devices))

    def _add(self, name, devices):
        name = _scene_name(name)
        _normalize_devices(devices)
        if name in self.database:
            raise Exception("Scene name already exists.")
        self.database[name] = devices
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        if not _same_scene(response, groundtruth):
            return False
        # Quirk kept: the output is only checked for "gold failed but we did not".
        if groundtruth["output"] is None and response["output"] is not None:
            return False
        return response["exception"] == groundtruth["exception"]


@LEVEL12.register_api
class DeleteScene(DatabaseApi):
    @enveloped
    def call(self, name: str) -> str:
        name = _scene_name(name)
        if name not in self.database:
            raise Exception("The scene does not exist.")
        del self.database[name]
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        response_name, groundtruth_name = response["input"]["name"], groundtruth["input"]["name"]
        return (
            response_name.strip().lower() == groundtruth_name.strip().lower()
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class ModifyScene(DatabaseApi):
    def call(self, name: str, devices: list) -> dict:
        devices = _mutable(devices)
        return self.respond({"name": name, "devices": devices}, lambda: self._modify(name, devices))

    def _modify(self, name, devices):
        name = _scene_name(name)
        _normalize_devices(devices)
        if name not in self.database:
            raise Exception("The scene does not exist.")
        self.database[name] = devices
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            _same_scene(response, groundtruth)
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class QueryScene(DatabaseApi):
    @enveloped
    def call(self, name: str) -> dict:
        name = _scene_name(name)
        if name not in self.database:
            raise Exception("Scene not found.")
        return self.database[name]

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            response["input"]["name"].strip().lower() == groundtruth["input"]["name"].strip().lower()
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )
