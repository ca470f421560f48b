"""Hotel booking (database "Hotel"): orders keyed "1", "2", ... by arrival."""

from __future__ import annotations

import datetime

from apibank_bench.apis.base import LEVEL12, Api, enveloped

DATE_FORMAT = "%Y-%m-%d"


def _date(text):
    """strptime's own ValueError/TypeError for anything not in DATE_FORMAT."""
    return datetime.datetime.strptime(text, DATE_FORMAT)


@LEVEL12.register_api
class BookHotel(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, hotel_name, check_in_time, check_out_time, room_count, adult_count, child_count):
        booking = {"hotel_name": hotel_name, "check_in_time": check_in_time, "check_out_time": check_out_time,
                   "room_count": room_count, "adult_count": adult_count, "child_count": child_count}
        return self.order(booking)  # the booking is stored as given: a copy of the input

    def order(self, item: dict) -> str:
        arrive, leave = _date(item["check_in_time"]), _date(item["check_out_time"])
        # Quirk: only "more than two adults in exactly one room" is refused; the
        # message claims two rooms were ordered, yet nothing is booked.
        if item["adult_count"] > 2 and item["room_count"] == 1:
            raise Exception("The number of adults is greater than 2. Two rooms are ordered.")
        for booked in self.database.values():
            if booked["hotel_name"] != item["hotel_name"]:
                continue
            start, end = _date(booked["check_in_time"]), _date(booked["check_out_time"])
            # Quirk: a stay that encloses an existing one (arrive before, leave after)
            # passes; room counts are never compared.
            if start <= arrive < end or start < leave <= end:
                raise Exception("The room is not available.")
        order_id = str(len(self.database) + 1)
        self.database[order_id] = item
        return order_id
