"""Level 3: trips (FlightSearch, HotelAvailability).

Quirk shared by both: a search converts the dates of every match *in place* from
datetimes to strings and returns the stored dicts themselves, so the instance's
state changes with each search (see each class).
"""

from __future__ import annotations

import datetime
from typing import Any

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi, assert_same_api

_DAY = "%Y-%m-%d"
_FLIGHT_TIME = "%Y-%m-%d %H:%M:%S"

# (source, destination, day of January 2022); every flight leaves 12:00, lands 15:00.
_ROUTES = (
    ("New York", "San Francisco", 1),
    ("Los Angeles", "San Francisco", 2),
    ("London", "San Francisco", 3),
    ("New York", "London", 4),
    ("New York", "Los Angeles", 5),
)


@LEVEL3.register_api
class FlightSearch(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.flight_data: list[dict[str, Any]] = [
            {
                "source": source,
                "destination": destination,
                "departure_date": datetime.datetime(2022, 1, day, 12, 0, 0),
                "arrival_date": datetime.datetime(2022, 1, day, 15, 0, 0),
            }
            for source, destination, day in _ROUTES
        ]

    @enveloped
    def call(self, source, destination, travel_dates):
        return {"flights": self._search(source, destination, travel_dates)}

    def _search(self, source, destination, travel_dates) -> list:
        day = datetime.datetime.strptime(travel_dates, _DAY).date()
        flights = []
        for flight in self.flight_data:
            # Quirk: once a flight was found its dates are strings, so any later search
            # on the same route fails with "'str' object has no attribute 'date'".
            if (flight["source"] == source and flight["destination"] == destination
                    and flight["departure_date"].date() == day):
                flight["departure_date"] = flight["departure_date"].strftime(_FLIGHT_TIME)
                flight["arrival_date"] = flight["arrival_date"].strftime(_FLIGHT_TIME)
                flights.append(flight)
        return flights


@LEVEL3.register_api
class HotelAvailability(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        # hotel_n: San Francisco, one night from January n to n+1, 2022.
        self.hotel_database: dict[str, dict[str, Any]] = {
            f"hotel_{n}": {
                "destination": "San Francisco",
                "check_in_date": datetime.datetime(2022, 1, n),
                "check_out_date": datetime.datetime(2022, 1, n + 1),
            }
            for n in range(1, 6)
        }

    @enveloped
    def call(self, destination: str, check_in_date: str, check_out_date: str) -> dict:
        return {"hotels": self._search(destination, check_in_date, check_out_date)}

    def _search(self, destination, check_in_date, check_out_date) -> list:
        datetime.datetime.strptime(check_in_date, _DAY)
        datetime.datetime.strptime(check_out_date, _DAY)
        hotels = []
        for hotel in self.hotel_database.values():
            if hotel["destination"] == destination and self._fits(hotel, check_in_date, check_out_date):
                # Quirk: a hotel found before holds strings, and strftime on a str raises
                # "'str' object has no attribute 'strftime'" (hotels converted earlier in
                # this same search stay converted).
                hotel["check_in_date"] = hotel["check_in_date"].strftime(_DAY)
                hotel["check_out_date"] = hotel["check_out_date"].strftime(_DAY)
                hotels.append(hotel)
        return hotels

    @staticmethod
    def _fits(hotel: dict, check_in_date: str, check_out_date: str) -> bool:
        def as_datetime(value):
            return value if isinstance(value, datetime.datetime) else datetime.datetime.strptime(value, _DAY)

        hotel_in, hotel_out = as_datetime(hotel["check_in_date"]), as_datetime(hotel["check_out_date"])
        wanted_in = datetime.datetime.strptime(check_in_date, _DAY)
        wanted_out = datetime.datetime.strptime(check_out_date, _DAY)
        return wanted_in >= hotel_in and wanted_out <= hotel_out

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: the exception is not compared, and an error response (output None)
        # makes the check itself raise TypeError.
        assert_same_api(response, groundtruth)
        got, want = response, groundtruth
        return (got["input"]["destination"] == want["input"]["destination"]
                and got["input"]["check_in_date"] == want["input"]["check_in_date"]
                and got["input"]["check_out_date"] == want["input"]["check_out_date"]
                and got["output"]["hotels"] == want["output"]["hotels"])
