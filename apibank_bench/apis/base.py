"""The shape every API of our environment shares.

Upstream's API classes are the specification: each of ours has the same
constructor arguments (passed positionally, as upstream's ToolManager does), the
same `call` signature (so a missing argument raises the same TypeError), the same
result envelope and exception strings, and the same `check_api_call_correctness`.
Metadata comes from `apibank_bench.data.specs`, never retyped here.
"""

from __future__ import annotations

import datetime
import functools
import inspect
from typing import Any, Callable, ClassVar

from apibank_bench.core.registry import Registry
from apibank_bench.data import specs


class Api:
    """Base of all our API implementations.

    Subclasses define `call(...)` with upstream's signature, its body under
    `@enveloped` (or, where the inputs are not the arguments as given, calling
    `respond`), and `check_api_call_correctness(response, groundtruth)` where
    upstream's is not the common one; the registry fills the metadata class
    attributes from the spec data.
    """

    api_set: ClassVar[str]
    description: ClassVar[str]
    input_parameters: ClassVar[dict[str, Any]]
    output_parameters: ClassVar[dict[str, Any]]
    database_name: ClassVar[str | None] = None
    #: Exceptions that are no outcome of the API (our installation's failures): raised, never enveloped.
    raised: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(self, init_database=None, token_checker=None) -> None:
        self.database: Any = init_database if init_database is not None else {}
        self.token_checker = token_checker

    # -- the result envelope -------------------------------------------------
    def respond(self, inputs: dict[str, Any], action: Callable[[], Any]) -> dict[str, Any]:
        """Run `action`; wrap its value or its exception text the way upstream does."""
        try:
            output = action()
        except self.raised:
            raise
        except Exception as exc:  # upstream turns every exception into its str()
            return self.envelope(inputs, None, str(exc))
        return self.envelope(inputs, output, None)

    def envelope(self, inputs: dict[str, Any], output: Any, exception: str | None) -> dict[str, Any]:
        return {"api_name": type(self).__name__, "input": inputs, "output": output, "exception": exception}

    def call(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # pragma: no cover - always overridden
        raise NotImplementedError

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        """Upstream's check of most Level-1/2 APIs (`same_call`); an API with another overrides it."""
        return same_call(response, groundtruth)


def enveloped(body: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """Turn an API's `call` body (its output, or an exception) into upstream's envelope.

    The input is the arguments by name, defaults filled in and `**kwargs` spread, in the
    signature's order, as upstream's dicts list them. Arguments that do not fit the
    signature raise Python's own TypeError from the body, naming `<Api>.call` as
    upstream's does, instead of an envelope.
    """
    signature = inspect.signature(body)

    @functools.wraps(body)
    def call(self: Api, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return body(self, *args, **kwargs)  # raises the TypeError (the arguments do not bind)
        bound.apply_defaults()
        inputs: dict[str, Any] = {}
        for name, value in list(bound.arguments.items())[1:]:  # after self
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                inputs.update(value)
            else:
                inputs[name] = value
        return self.respond(inputs, lambda: body(self, *args, **kwargs))

    return call


# -- checks shared by many APIs ------------------------------------------------

def same_call(response: dict, groundtruth: dict) -> bool:
    """Input, output and exception all equal: the check most upstream APIs use."""
    return (
        response["input"] == groundtruth["input"]
        and response["output"] == groundtruth["output"]
        and response["exception"] == groundtruth["exception"]
    )


def same_result(response: dict, groundtruth: dict) -> bool:
    """Output and exception equal (input ignored)."""
    return response["output"] == groundtruth["output"] and response["exception"] == groundtruth["exception"]


def same_time_or_result(response: dict, groundtruth: dict) -> bool:
    """The Delete check of agendas and reminders. Quirks: two successes need only the same time;
    otherwise output and exception equal, the input ignored."""
    if groundtruth["output"] == "success" and response["output"] == "success":
        return response["input"]["time"] == groundtruth["input"]["time"]
    return same_result(response, groundtruth)


def words_overlap(a: str, b: str) -> bool:
    """Upstream's fuzzy text match: Jaccard of space-split word sets above 0.5.

    Quirk kept: the split is on single spaces (`str.split(" ")`), so double
    spaces yield empty-string "words" that count in the union.
    """
    left, right = set(a.split(" ")), set(b.split(" "))
    return len(left & right) / len(left | right) > 0.5


class DatabaseApi(Api):
    """An API whose upstream constructor takes only the database (no token checker slot)."""

    def __init__(self, init_database=None) -> None:
        super().__init__(init_database)


def parse_padded(text: str, fmt: str):
    """Upstream's lenient date parsing: the parsed datetime, or the exception (returned, not raised).

    The text is stripped and, when it has exactly two '-', the year is zero-padded
    to 4 digits first. A non-str raises (the strip happens outside the try).
    """
    text = text.strip()
    parts = text.split("-")
    if len(parts) == 3:
        parts[0] = parts[0].zfill(4)
        text = "-".join(parts)
    try:
        return datetime.datetime.strptime(text, fmt)
    except Exception as exc:
        return exc


def canonical_time(text: str, fmt: str):
    """`parse_padded` re-rendered with `fmt`; an exception object stays as it is.

    Quirk kept: callers compare these values, and two exception objects never
    compare equal, so two unparsable dates do not "match".
    """
    parsed = parse_padded(text, fmt)
    return parsed if isinstance(parsed, Exception) else parsed.strftime(fmt)


# -- the registry ----------------------------------------------------------------

class ApiSet(Registry[type[Api]]):
    """The implementations of one of upstream's API folders, by API name (its package registers them
    when imported: `apibank_bench.apis` hands each set its loader)."""

    def __init__(self, api_set: str) -> None:
        super().__init__("API", f"the {api_set!r} API set")
        self.name = api_set

    def register_api(self, cls: type[Api]) -> type[Api]:
        """Class decorator: attach the spec's metadata and register the class under its name."""
        item = specs.spec(self.name, cls.__name__)
        cls.api_set = self.name
        cls.description = item["description"]
        cls.input_parameters = item["input_parameters"]
        cls.output_parameters = item["output_parameters"]
        cls.database_name = item.get("database_name")
        return self.add(cls.__name__, cls, cls.description)

    def classes(self) -> dict[str, type[Api]]:
        return {entry.name: entry.value for entry in self}


LEVEL12 = ApiSet(specs.LEVEL12)
LEVEL3 = ApiSet(specs.LEVEL3)
