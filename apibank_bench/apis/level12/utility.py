"""Everyday tools without a database: Calculator, GetToday, PlayMusic, SendEmail,
and Translate (online only)."""

from __future__ import annotations

import re

from apibank_bench.apis.arithmetic import calculate  # upstream's Level-1/2 and Level-3 calculators are the same
from apibank_bench.apis.base import LEVEL12, Api, enveloped

# Upstream's receiver pattern: one optional '.' or '_' inside the local part (at
# least two characters), a word domain and a 2-3 character word suffix.
_EMAIL = re.compile(r"^[a-z0-9]+[._]?[a-z0-9]+@\w+\.\w{2,3}$")


@LEVEL12.register_api
class Calculator(Api):
    """See `apis.arithmetic`: upstream's list-rewriting evaluator, never eval.

    Documented difference (shared with Level 3): a leading operator in a (sub)formula
    whose first operation succeeds, e.g. '-3+2', makes upstream loop forever; we
    return 'invalid formula' instead.
    """

    def __init__(self) -> None:
        super().__init__()

    @enveloped
    def call(self, formula):
        return calculate(formula)

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        same_formula = response["input"]["formula"].replace(" ", "") == groundtruth["input"]["formula"].replace(" ", "")
        return same_formula and response["output"] == groundtruth["output"] and response["exception"] == groundtruth["exception"]


@LEVEL12.register_api
class GetToday(Api):
    TODAY = "2023-03-31"  # upstream's clock is frozen at this date

    def __init__(self) -> None:
        super().__init__()

    def call(self, **kwargs):
        # Any arguments are accepted and ignored; the input is reported as None.
        return self.envelope(None, self.TODAY, None)

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Quirk: the ground truth is never read; any non-None output passes.
        return response["output"] is not None and response["exception"] is None and response["input"] is None


@LEVEL12.register_api
class PlayMusic(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, music_name):
        music_name = music_name.lower().strip()
        if music_name == "":
            raise Exception("The music name cannot be empty.")
        return f"music://{music_name}"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return response["output"] == groundtruth["output"]  # quirk: only the output counts


@LEVEL12.register_api
class SendEmail(Api):
    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, receiver, subject, content):
        receiver, subject, content = receiver.strip(), subject.strip(), content.strip()
        if not _EMAIL.match(receiver):
            raise Exception("Email address of the receiver is invalid.")
        if subject == "":
            raise Exception("Subject cannot be empty.")
        if content == "":
            raise Exception("Content cannot be empty.")
        return "success"

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        # Receivers compare case-insensitively, subject and content exactly; all stripped.
        ours, theirs = response["input"], groundtruth["input"]
        fields = [
            (ours["receiver"].strip().lower(), theirs["receiver"].strip().lower()),
            (ours["subject"].strip(), theirs["subject"].strip()),
            (ours["content"].strip(), theirs["content"].strip()),
        ]
        return (
            all(mine == gold for mine, gold in fields)
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )


@LEVEL12.register_api
class Translate(Api):
    """Offline: upstream sends every text to an online translation service, so no
    translation can be reproduced here; every well-formed call reports that the
    network is needed."""

    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)

    @enveloped
    def call(self, src, **kwargs):
        # src_lang / tgt_lang are optional and appear in the input only when given.
        return self.translate(src, **kwargs)

    def translate(self, src, **kwargs):
        # Upstream lower-cases the language names before anything else (a non-string
        # one fails here with the same AttributeError); the rest needs the service.
        for key in ("src_lang", "tgt_lang"):
            if key in kwargs:
                kwargs[key].lower()
        raise Exception("Translate needs an online translation service and is unavailable offline.")

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return (
            response["api_name"] == groundtruth["api_name"]
            and response["input"]["src"] == groundtruth["input"]["src"]
            and response["output"] == groundtruth["output"]
            and response["exception"] == groundtruth["exception"]
        )
