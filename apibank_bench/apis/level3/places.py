"""Level 3: places and their weather (Geocoding, GetWeatherForCoordinates,
NearbyRestaurants, ClothingRecommendation)."""

from __future__ import annotations

from typing import Any

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi, assert_same_api, fields_equal

# The five known places and their coordinates (longitudes without a sign, as upstream).
_NEW_YORK = (40.7128, 74.0060)
_SAN_FRANCISCO = (37.7749, 122.4194)
_LONDON = (51.5074, 0.1278)
_PARIS = (48.8566, 2.3522)
_TOKYO = (35.6762, 139.6503)


@LEVEL3.register_api
class Geocoding(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.address_to_coordinates = {
            "New York City": _NEW_YORK,
            "San Francisco": _SAN_FRANCISCO,
            "London": _LONDON,
            "Paris": _PARIS,
            "Tokyo": _TOKYO,
        }

    @enveloped
    def call(self, address: str) -> dict:
        # Exact key lookup: an unknown address fails with the KeyError's text.
        latitude, longitude = self.address_to_coordinates[address]
        return {"latitude": latitude, "longitude": longitude}


@LEVEL3.register_api
class GetWeatherForCoordinates(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.coordinates_to_weather = [
            (_NEW_YORK, {"temperature": 10, "humidity": 0.5, "description": "Clear"}),
            (_SAN_FRANCISCO, {"temperature": 20, "humidity": 0.8, "description": "Cloudy"}),
            (_LONDON, {"temperature": 5, "humidity": 0.9, "description": "Rainy"}),
            (_PARIS, {"temperature": 15, "humidity": 0.7, "description": "Sunny"}),
            (_TOKYO, {"temperature": 25, "humidity": 0.6, "description": "Rainy"}),
        ]

    # Quirk: upstream only catches network errors, so for unknown coordinates the
    # lookup's None is subscripted and the TypeError escapes `call` (no envelope).
    raised = (Exception,)

    @enveloped
    def call(self, latitude: float, longitude: float) -> dict:
        weather: Any = next((w for place, w in self.coordinates_to_weather if place == (latitude, longitude)), None)
        return {"temperature": weather["temperature"], "humidity": weather["humidity"],
                "description": weather["description"]}

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: no API-name assertion here.
        return fields_equal(response, groundtruth, "output", "exception", "input")


@LEVEL3.register_api
class NearbyRestaurants(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.restaurants = [
            {"coordinates": _NEW_YORK, "name": "Restaurant A"},
            {"coordinates": _SAN_FRANCISCO, "name": "Restaurant B"},
            {"coordinates": _NEW_YORK, "name": "Restaurant C"},
            {"coordinates": _SAN_FRANCISCO, "name": "Restaurant D"},
        ]

    @enveloped
    def call(self, latitude: float, longitude: float, distance: int) -> dict:
        # Quirk: the location and distance are ignored; every restaurant is returned
        # (the stored list itself, coordinates as tuples).
        return {"restaurants": self.restaurants}

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: only the inputs are compared.
        assert_same_api(response, groundtruth)
        return fields_equal(response, groundtruth, "input")


@LEVEL3.register_api
class ClothingRecommendation(InlineApi):
    @enveloped
    def call(self, temperature: float, humidity: float, weather_conditions: str) -> dict:
        # Comparisons written as upstream's so that odd types fail with the same TypeError.
        options: list = []
        if temperature < 10:
            options += ["Warm coat", "Hat", "Gloves"]
        if temperature >= 10 and temperature < 20:
            options += ["Light jacket", "Long-sleeved shirt"]
        if temperature >= 20 and temperature < 30:
            options += ["T-shirt", "Shorts"]
        if temperature >= 30:
            options += ["Sun hat", "Sunglasses", "Loose-fitting clothes"]
        if humidity > 70:  # Quirk: percent scale, while the weather API reports 0-1
            options += ["Umbrella", "Waterproof shoes"]
        if "rain" in weather_conditions.lower():
            options.append("Raincoat")
        return {"clothing_options": options}
