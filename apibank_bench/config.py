"""The run's settings: one table gives each its pytest option, ini key and environment variable.

`--apibank-limit 5` (pytest), `apibank_limit = 5` (ini) and `APIBANK_LIMIT=5`
(environment) all set `RunConfig.limit`; the option wins over the ini file,
which wins over the environment.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

#: `agents_sdk` is an alias of `single` with `agent_kind=sdk`.
TOPOLOGIES = ("single", "independent", "decentralized", "centralized", "sequential", "agents_sdk")
MESSAGE_FORMATS = ("freeform", "semi_structured", "structured_soft")
TEAM_SIZES = (2, 4, 8, 10)


def _bool(text: str | bool | None) -> bool | None:
    if text is None or isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected a boolean, got {text!r}")


def _list(text: str | list | None) -> list[str]:
    if text is None:
        return []
    if isinstance(text, list):
        return [item for part in text for item in _list(part)]
    return [item for item in str(text).replace(",", " ").split() if item]


def _shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    index, _, count = str(text).partition("/")
    shard = (int(index), int(count))
    if not (count and 1 <= shard[0] <= shard[1]):
        raise ValueError(f"--apibank-shard takes i/n with 1 <= i <= n, got {text!r}")
    return shard


@dataclass(frozen=True)
class Setting:
    name: str
    help: str
    parse: Callable[[Any], Any] = str
    default: Any = None
    choices: tuple | None = None
    flag: bool = False  #: a switch: --apibank-NAME / --apibank-no-NAME


SETTINGS: tuple[Setting, ...] = (
    Setting("root", "API-Bank data root (default vendor/api-bank)"),
    Setting("level", "all (the 100-task eval manifest), 1, 2 or 3 (curated lists)", default="all",
            choices=("all", "1", "2", "3")),
    Setting("limit", "run at most N instances", int),
    Setting("offset", "skip the first K instances of the manifest", int, 0),
    Setting("only", "only these task IDs (comma or space separated)", _list, []),
    Setting("shard", "run shard i of n (1-based), e.g. 2/4", _shard),
    Setting("topology", "agent topology", default="single", choices=TOPOLOGIES),
    Setting("team_size", "agents in a team (independent, decentralized, centralized)", int, 4),
    Setting("rounds", "debate rounds (decentralized)", int, 2),
    Setting("message_format", "what one agent passes to another", default="freeform", choices=MESSAGE_FORMATS),
    Setting("agent_kind", "what answers at each node of every topology: chat (one chat completion) or sdk "
                          "(an OpenAI Agents SDK agent with the visible APIs as function tools)",
            default="chat", choices=("chat", "sdk")),
    Setting("vote", "how voting teams count calls: reference (exact arguments, as the reference harness) "
                    "or normalized (string values trimmed)", default="reference", choices=("reference", "normalized")),
    Setting("model", "model name; 'gold' replays the gold call (a harness self-check); "
                     "unset with no base URL = the embedded local model"),
    Setting("base_url", "OpenAI-compatible endpoint(s), comma separated (round-robin)", _list, []),
    Setting("toolsearcher_scorer", "official, upstream or keyword (default: keyword for Level 1, else official)",
            choices=("official", "upstream", "keyword")),
    Setting("out_dir", "where results go (default results/apibank/<topology>)"),
    Setting("constrained", "grammar-constrained decoding (default: on for the embedded model only)",
            _bool, None, flag=True),
    Setting("cache", "on-disk response cache (default on)", _bool, True, flag=True),
    Setting("seed", "sampling seed", int, 0),
    Setting("prompts_dir", "a folder of role prompts overriding the packaged ones"),
    Setting("resume", "skip instances already in results.jsonl", _bool, False, flag=True),
)


@dataclass(frozen=True)
class RunConfig:
    root: str | None = None
    level: str = "all"
    limit: int | None = None
    offset: int = 0
    only: list[str] = field(default_factory=list)
    shard: tuple[int, int] | None = None
    topology: str = "single"
    team_size: int = 4
    rounds: int = 2
    message_format: str = "freeform"
    agent_kind: str = "chat"
    vote: str = "reference"
    model: str | None = None
    base_url: list[str] = field(default_factory=list)
    toolsearcher_scorer: str | None = None
    out_dir: str | None = None
    constrained: bool | None = None
    cache: bool = True
    seed: int = 0
    prompts_dir: str | None = None
    resume: bool = False

    @property
    def is_gold(self) -> bool:
        return self.model == "gold"

    @property
    def results_dir(self) -> str:
        # Another agent kind gets its own folder, so a resumed run never mixes kinds.
        plain = self.agent_kind == "chat" or self.topology == "agents_sdk"
        name = self.topology if plain else f"{self.topology}_{self.agent_kind}"
        return self.out_dir or os.path.join("results", "apibank", "gold" if self.is_gold else name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


assert [s.name for s in SETTINGS] == [f.name for f in fields(RunConfig)], "SETTINGS and RunConfig disagree"


def env_name(setting: Setting) -> str:
    return f"APIBANK_{setting.name.upper()}"


def resolve(option_value: Callable[[Setting], Any], ini_value: Callable[[Setting], Any]) -> RunConfig:
    """Build the config: option, else ini, else environment, else default; parse and check each."""
    values = {}
    for setting in SETTINGS:
        raw = option_value(setting)
        if raw is None or raw == []:
            raw = ini_value(setting) or os.environ.get(env_name(setting)) or None
        value = setting.default if raw is None else setting.parse(raw)
        if setting.choices and value is not None and str(value) not in setting.choices:
            raise ValueError(f"--apibank-{setting.name.replace('_', '-')}: {value!r} is not one of "
                             f"{', '.join(setting.choices)}")
        values[setting.name] = value
    if values["topology"] != "single" and values["team_size"] not in TEAM_SIZES:
        raise ValueError(f"--apibank-team-size must be one of {TEAM_SIZES}, got {values['team_size']}")
    return RunConfig(**values)
