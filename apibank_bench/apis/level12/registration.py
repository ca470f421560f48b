"""Hospital appointments (database `Appointments`): appointment id -> patient, date, doctor."""

from __future__ import annotations

import random

from apibank_bench.apis.base import LEVEL12, DatabaseApi, canonical_time, enveloped

DATE_FORMAT = "%Y-%m-%d"


def _date(text):
    """The canonical date string, or the exception object when it does not parse."""
    return canonical_time(text, DATE_FORMAT)


def _valid_date(text) -> str:
    date = _date(text)
    if isinstance(date, Exception):
        raise date
    return date


@LEVEL12.register_api
class AppointmentRegistration(DatabaseApi):
    @enveloped
    def call(self, patient_name: str, date: str, doctor_name: str) -> str:
        patient_name = patient_name.strip()
        doctor_name = doctor_name.strip()
        if patient_name == "" or doctor_name == "":
            raise Exception("Patient name or doctor name cannot be empty.")
        date = _valid_date(date)
        for appointment in self.database.values():
            if appointment["patient_name"] == patient_name and _date(appointment["date"]) == date:
                if appointment["doctor_name"] == doctor_name:
                    raise Exception("This appointment has already been registered.")
                raise Exception("This patient has already been registered in this day.")
        # Same draws from the global `random` as upstream, so seeded runs agree.
        appointment_id = str(random.randint(10000000, 99999999))
        while appointment_id in self.database:
            appointment_id = str(random.randint(10000000, 99999999))
        self.database[appointment_id] = {"patient_name": patient_name, "date": date, "doctor_name": doctor_name}
        return appointment_id

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        def key(result):
            inputs = result["input"]
            return (inputs["patient_name"].strip(), _date(inputs["date"]), inputs["doctor_name"].strip())

        response_key, groundtruth_key = key(response), key(groundtruth)
        # Field by field: two unparsable dates (exception objects) never match.
        if any(mine != gold for mine, gold in zip(response_key, groundtruth_key)):
            return False
        # Quirk kept: the (random) id is not compared, only "gold failed but we did not".
        if groundtruth["output"] is None and response["output"] is not None:
            return False
        return response["exception"] == groundtruth["exception"]


@LEVEL12.register_api
class CancelRegistration(DatabaseApi):
    @enveloped
    def call(self, appointment_id: str) -> str:
        appointment_id = appointment_id.strip()
        if appointment_id not in self.database:
            raise Exception("The appointment ID is incorrect.")
        del self.database[appointment_id]
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            response["input"]["appointment_id"].strip() == groundtruth["input"]["appointment_id"].strip()
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class ModifyRegistration(DatabaseApi):
    @enveloped
    def call(self, appointment_id: str, new_appointment_date: str | None = None,
             new_appointment_doctor: str | None = None) -> dict:
        return self._modify(appointment_id, new_appointment_date, new_appointment_doctor)

    def _modify(self, appointment_id, new_date, new_doctor):
        appointment_id = appointment_id.strip()
        if appointment_id not in self.database:
            raise Exception("The appointment ID does not exist.")
        if new_date is not None:
            new_date = _date(new_date)
        if new_doctor is not None:
            new_doctor = new_doctor.strip()
            if new_doctor == "":
                raise Exception("Fail because the doctor name is empty.")
        # The date error is raised only after the doctor check, as upstream.
        if isinstance(new_date, Exception):
            raise new_date
        if new_date is None and new_doctor is None:
            raise Exception("Fail because no modification is made.")
        record = self.database[appointment_id]
        # Stored dates are compared raw (not re-canonicalized).
        same_date = new_date is not None and new_date == record["date"]
        same_doctor = new_doctor is not None and new_doctor == record["doctor_name"]
        if same_date and same_doctor:
            raise Exception("Fail because no modification is made.")
        if same_date:
            raise Exception("Fail because date is not changed.")
        if same_doctor:
            raise Exception("Fail because doctor is not changed.")
        if new_date is not None:
            record["date"] = new_date
        if new_doctor is not None:
            record["doctor_name"] = new_doctor
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk kept: only the response's id goes through str() before strip().
        response_id = str(response["input"]["appointment_id"])
        groundtruth_id = groundtruth["input"]["appointment_id"]
        response_date = response["input"]["new_appointment_date"]
        groundtruth_date = groundtruth["input"]["new_appointment_date"]
        response_doctor = response["input"]["new_appointment_doctor"]
        groundtruth_doctor = groundtruth["input"]["new_appointment_doctor"]
        response_id, groundtruth_id = response_id.strip(), groundtruth_id.strip()
        response_date = _date(response_date) if response_date is not None else None
        groundtruth_date = _date(groundtruth_date) if groundtruth_date is not None else None
        response_doctor = response_doctor.strip() if response_doctor is not None else None
        groundtruth_doctor = groundtruth_doctor.strip() if groundtruth_doctor is not None else None
        return (
            response_id == groundtruth_id
            and response_date == groundtruth_date
            and response_doctor == groundtruth_doctor
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class QueryRegistration(DatabaseApi):
    @enveloped
    def call(self, patient_name: str, date: str) -> dict:
        patient_name = patient_name.strip()
        date = _valid_date(date)
        appointments = {
            appointment_id: record
            for appointment_id, record in self.database.items()
            if record["patient_name"] == patient_name and _date(record["date"]) == date
        }
        if not appointments:
            raise Exception("No appointments found.")
        return appointments

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        response_name = response["input"]["patient_name"]
        groundtruth_name = groundtruth["input"]["patient_name"]
        response_name, groundtruth_name = response_name.strip(), groundtruth_name.strip()
        response_date = response["input"]["date"]
        groundtruth_date = groundtruth["input"]["date"]
        response_date, groundtruth_date = _date(response_date), _date(groundtruth_date)
        return (
            response_name == groundtruth_name
            and response_date == groundtruth_date
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )
