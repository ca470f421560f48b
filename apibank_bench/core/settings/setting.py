"""One setting: its declaration (`Setting`), what it is to a measurement (`role`) and the commands
that take it. Choices that name things a higher layer owns (topologies, agent kinds, ToolSearcher
scorers) are handed down by that layer (`hand_down_choices`): core names no higher layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from apibank_bench.core.settings.parsers import parse_list, parse_urls

#: A setting's role: it defines what a run measures, only how the run is carried out, or which instances it covers.
MEASUREMENT, OPERATIONAL, SELECTION = "measurement", "operational", "selection"
ROLES = (MEASUREMENT, OPERATIONAL, SELECTION)
#: The commands that take every setting of a benchmark run as a flag.
RUN_COMMANDS = ("run", "sweep")
#: ... and those that also build a team and talk to a model.
TEAM_COMMANDS = (*RUN_COMMANDS, "optimize")
#: Every command that reads the API-Bank data.
DATA_COMMANDS = (*TEAM_COMMANDS, "score", "summary", "tasks", "manifests", "data", "show")



class HandedDown:
    """The choices of a setting whose names a higher layer owns: it hands them down (`hand_down_choices`)."""

    def __repr__(self) -> str:
        return "HANDED_DOWN"


HANDED_DOWN = HandedDown()
#: setting name -> the function giving its choices, as the owning layer handed it down.
_CHOICE_SOURCES: dict[str, Callable[[], Iterable[str]]] = {}


def hand_down_choices(name: str, source: Callable[[], Iterable[str]]) -> None:
    """The choices of setting `name` (declared `choices=HANDED_DOWN`) are `source()`, read when first needed."""
    _CHOICE_SOURCES[name] = source


@dataclass(frozen=True)
class Setting:
    name: str
    help: str
    parse: Callable[[Any], Any] = str
    default: Any = None
    choices: tuple[str, ...] | HandedDown | None = None  #: a tuple, or HANDED_DOWN by the layer owning the names
    flag: bool = False  #: a switch: --apibank-NAME / --apibank-no-NAME
    env: tuple[str, ...] = ()  #: extra environment names read after APIBANK_NAME
    deprecated_env: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)  #: old name -> converter
    secret: bool = False  #: never written or printed
    default_text: str | None = None  #: the default as the docs' settings table states it, where it is not a plain value
    group: str = "run"  #: "run" (what and how to run), "model" (how to reach and sample the model) or
    #: "sweep" (where a sweep's cells run: a flag of `sweep` only)
    role: str = MEASUREMENT  #: MEASUREMENT, OPERATIONAL or SELECTION (see the module's docstring)
    commands: tuple[str, ...] = RUN_COMMANDS  #: the `apibank-bench` commands that take it as `--NAME`
    of_run: bool = True  #: a setting of a benchmark run: a RunConfig field, a pytest option and an ini key
    short: str | None = None  #: a one-letter flag besides `--NAME` (`-n`, pytest-xdist's own)
    repeat: bool = False  #: a list setting whose flag may be given again, each time adding (`--model-role`)

    def __post_init__(self) -> None:
        assert self.role in ROLES, f"{self.name}: role {self.role!r} is not one of {ROLES}"

    @property
    def option(self) -> str:
        return "--apibank-" + self.name.replace("_", "-")

    @property
    def flag_name(self) -> str:
        """The command-line flag, the same in every command."""
        return "--" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "apibank_" + self.name

    @property
    def env_names(self) -> tuple[str, ...]:
        return ("APIBANK_" + self.name.upper(), *self.env)

    @property
    def many(self) -> bool:
        return self.repeat or self.parse in (parse_list, parse_urls)

    def allowed(self) -> tuple[str, ...] | None:
        """The values it accepts (None: any)."""
        if isinstance(self.choices, HandedDown):
            try:
                source = _CHOICE_SOURCES[self.name]
            except KeyError:
                raise LookupError(f"the choices of {self.flag_name} are handed down by the layer that names them, "
                                  "and none were (a composition root calls runs.setting_rules.hand_down() first)") from None
            return tuple(source())
        return self.choices

    def readme_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default == []:
            return "-"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return f"`{self.default}`"
