"""Level 3: pay (GetOccupationSalary, TaxCalculator)."""

from __future__ import annotations

from apibank_bench.apis.base import LEVEL3, enveloped
from apibank_bench.apis.level3._common import InlineApi, assert_same_api


@LEVEL3.register_api
class GetOccupationSalary(InlineApi):
    def __init__(self) -> None:
        super().__init__()
        self.salary_info = {
            "Financial Analyst": 100000,
            "Software Engineer": 120000,
            "Data Scientist": 150000,
            "Product Manager": 130000,
            "Doctor": 200000,
        }

    @enveloped
    def call(self, occupation: str) -> dict:
        if occupation not in self.salary_info:
            raise Exception("The occupation is not in the database.")
        return {"salary": self.salary_info[occupation]}


@LEVEL3.register_api
class TaxCalculator(InlineApi):
    def __init__(self, tax_rates=None) -> None:
        super().__init__()
        # Lower bound of a bracket -> rate applied to the *whole* salary.
        # Quirk: the top bracket starts at infinity, so any finite salary from 5000 up
        # is taxed at 30%, not 40%.
        self.tax_rates = tax_rates if tax_rates is not None else {
            0: 0.0, 1000: 0.1, 3000: 0.2, 5000: 0.3, float("inf"): 0.4,
        }

    @enveloped
    def call(self, salary):
        # Quirk: a salary below every bracket (negative, NaN) makes next() raise a
        # bare StopIteration, so the exception text is "".
        rate = next(rate for bound, rate in sorted(self.tax_rates.items(), reverse=True) if salary >= bound)
        return {"salary_after_tax": salary - salary * rate}

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: an error response (output None) makes the check itself raise TypeError.
        assert_same_api(response, groundtruth)
        return (response["input"]["salary"] == groundtruth["input"]["salary"]
                and response["output"]["salary_after_tax"] == groundtruth["output"]["salary_after_tax"]
                and response["exception"] == groundtruth["exception"])
