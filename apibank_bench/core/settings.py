"""Every setting of a run, declared once.

`TABLE` is the one table. From its run and model rows (`SETTINGS`) come the pytest
options (`--apibank-NAME`), the ini keys (`apibank_NAME`), the environment variables
(`APIBANK_NAME`, and the OpenAI client's own `OPENAI_BASE_URL` / `OPENAI_API_KEY`
where noted), the flags of `apibank-bench run`, the README's options table and the
`config.run` part of `summary.json`. Its sweep rows (`SWEEP_SETTINGS`: where a
sweep's cells run) are flags of `apibank-bench sweep` and environment variables
only, since they do not change what a run does. Precedence: command line, then ini,
then environment, then default.

Choices that name a registered thing (topologies, ToolSearcher scorers, agent kinds)
are read from that registry when first needed, so a new topology module is all it
takes to add a choice.
"""

from __future__ import annotations

import importlib
import json
import os
import warnings
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping

# -- value parsers -------------------------------------------------------------------------

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def parse_bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false, yes/no, on/off), got {text!r}")


def parse_list(text: Any) -> list[str]:
    """"a, b c" or ["a,b", "c"] -> ["a", "b", "c"]."""
    if isinstance(text, (list, tuple)):
        return [item for part in text for item in parse_list(part)]
    return [item for item in str(text).replace(",", " ").split() if item]


def parse_urls(text: Any) -> list[str]:
    return [url.rstrip("/") for url in parse_list(text)]


def parse_shard(text: Any) -> tuple[int, int]:
    index, sep, count = str(text).partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = None
    if not sep or shard is None or not 1 <= shard[0] <= shard[1]:
        raise ValueError(f"expected i/n with 1 <= i <= n, got {text!r}")
    return shard


def parse_json_object(text: Any) -> dict:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def _at_least(minimum: int, kind: Callable[[Any], Any] = int) -> Callable[[Any], Any]:
    def parse(text: Any) -> Any:
        value = kind(text)
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def parse_alpha(text: Any) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise ValueError(f"a significance level must be between 0 and 1, got {text!r}")
    return value


# -- the table ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    name: str
    help: str
    parse: Callable[[Any], Any] = str
    default: Any = None
    choices: tuple[str, ...] | str | None = None  #: a tuple, or "module:REGISTRY" read lazily
    flag: bool = False  #: a switch: --apibank-NAME / --apibank-no-NAME
    env: tuple[str, ...] = ()  #: extra environment names read after APIBANK_NAME
    deprecated_env: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)  #: old name -> converter
    secret: bool = False  #: never written or printed
    default_text: str | None = None  #: the default as the README states it, where it is not a plain value
    group: str = "run"  #: "run" (what and how to run), "model" (how to reach and sample the model) or
    #: "sweep" (where a sweep's cells run: a flag of `sweep` only)

    @property
    def option(self) -> str:
        return ("--" if self.group == "sweep" else "--apibank-") + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "apibank_" + self.name

    @property
    def env_names(self) -> tuple[str, ...]:
        return ("APIBANK_" + self.name.upper(), *self.env)

    @property
    def many(self) -> bool:
        return self.parse in (parse_list, parse_urls)

    def allowed(self) -> tuple[str, ...] | None:
        if isinstance(self.choices, str):
            module, _, attribute = self.choices.partition(":")
            return tuple(getattr(importlib.import_module(module), attribute).names())
        return self.choices

    def readme_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default == []:
            return "-"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return f"`{self.default}`"


_NO_CACHE = {"APIBANK_NO_CACHE": lambda text: not parse_bool(text)}

TABLE: tuple[Setting, ...] = (
    # what to run
    Setting("root", "the API-Bank data root", default_text="`vendor/api-bank`"),
    Setting("level", "`all` = the 100-task eval manifest (33/33/34); `1`, `2`, `3` = that level's curated list",
            default="all", choices=("all", "1", "2", "3")),
    Setting("limit", "run at most N instances of the selection (`apibank-bench run`: default 2, 0 = all)",
            _at_least(0), default_text="all"),
    Setting("offset", "skip the first K instances of the manifest", _at_least(0), 0),
    Setting("only", "only these task IDs (as in the manifest, or without the `level-N::` prefix)", parse_list, []),
    Setting("shard", "`i/n`: every n-th instance starting at the i-th", parse_shard),
    Setting("topology", "the agent topology", default="single",
            choices="apibank_bench.agents.topologies:TOPOLOGIES"),
    Setting("team_size", "agents in a team: 2, 4, 8 or 10", int, 4),
    Setting("rounds", "debate rounds after the first answers (decentralized)", _at_least(0), 2),
    Setting("message_format", "what agents pass each other", default="freeform",
            choices=("freeform", "semi_structured", "structured_soft")),
    Setting("agent_kind", "what answers at each node of every topology", default="chat",
            choices="apibank_bench.agents.kinds:AGENT_KINDS"),
    Setting("vote", "how voting teams count calls: `reference` (exact arguments, as the reference harness) or "
            "`normalized` (string values trimmed)", default="reference", choices=("reference", "normalized")),
    Setting("prompts_dir", "a folder `<topology>/<role>.txt` overriding the packaged role prompts"),
    Setting("toolsearcher_scorer", "how a ToolSearcher call is scored",
            choices="apibank_bench.scoring.toolsearcher_scorers:SCORERS",
            default_text="`keyword` for Level 1, else `official`"),
    Setting("out_dir", "where results go (emptied when the first instance of a fresh run finishes)",
            default_text="`results/apibank/<topology>` (`<topology>_sdk` for sdk agents)"),
    Setting("resume", "skip instances already finished in `results.jsonl` (errored ones run again)", parse_bool,
            False, flag=True),
    Setting("concurrency", "instances in flight at once in each process", _at_least(1),
            default_text="remote: 32, embedded model and gold: 1"),
    Setting("instance_timeout", "seconds one instance may take before it becomes an error row (0 = no limit)",
            _at_least(0, float), 600.0),
    Setting("max_consecutive_errors", "stop the run after this many instances in a row fail at the endpoint "
            "(0 = never)", _at_least(0), 10),
    Setting("epochs", "solve every instance K times; epoch e samples with every seed moved by e x 10000 (epoch 0: "
            "the protocol's seeds); one row, case and trace per (instance, epoch)", _at_least(1), 1),
    Setting("baseline", "a results folder to gate against: after the run, pair on the shared instances and fail "
            "the session only if the run is significantly worse (exact McNemar)"),
    Setting("gate_alpha", "the regression gate's significance level (with `--apibank-baseline`)", parse_alpha, 0.05),
    # the model
    Setting("model", "model name; `gold` replays the gold calls (a harness self-check)", group="model",
            default_text="the embedded model"),
    Setting("base_url", "OpenAI-compatible endpoint(s), comma separated (spread by `--routing`); none = the embedded "
            "model",
            parse_urls, [], env=("OPENAI_BASE_URL",),
            deprecated_env={"APIBANK_BASE_URLS": parse_urls}, group="model"),
    Setting("routing", "how requests are spread over several base URLs: `load` (to the fewest outstanding requests "
            "weighted by each endpoint's moving-average latency; an endpoint that keeps failing is left out for a "
            "while) or `round_robin` (each in turn)", default="load", choices=("load", "round_robin"), group="model"),
    Setting("api_key", "the endpoint's API key", env=("OPENAI_API_KEY",), secret=True, group="model"),
    Setting("temperature", "sampling temperature", float, 0.2, group="model"),
    Setting("top_p", "nucleus sampling", float, 0.9, group="model"),
    Setting("max_tokens", "completion token limit", _at_least(1), 1024, group="model"),
    Setting("seed", "sampling seed (each team member samples with its own offset)", int, 0, group="model"),
    Setting("timeout", "seconds per HTTP request", float, 60.0, group="model"),
    Setting("max_retries", "retries of a failed request (timeouts, connection errors, 408, 429, 5xx)",
            _at_least(0), 5, group="model"),
    Setting("max_in_flight", "model requests in flight at once, per process (halved on HTTP 429, regained after "
            "successes)", _at_least(1), 128, group="model"),
    Setting("extra_body", "JSON object merged into every request", parse_json_object, {}, group="model",
            default_text="-"),
    Setting("server_kind", "how a grammar is sent to the server", default="llama.cpp",
            choices=("llama.cpp", "vllm", "vllm-structured", "none"), group="model"),
    Setting("constrained", "grammar-constrained decoding from the visible API schemas", parse_bool, None,
            flag=True, default_text="embedded: on, remote: off", group="model"),
    Setting("cache", "the on-disk response cache (re-runs make no repeated model calls)", parse_bool, True,
            flag=True, deprecated_env=_NO_CACHE, group="model"),
    Setting("cache_dir", "the cache folder (responses, the assembled embedded model, the ToolSearcher model)",
            default="~/.cache/apibank-bench", group="model"),
    # where a sweep's cells run (`apibank-bench sweep` only)
    Setting("executor", "where a sweep's cells run: `local` (one after another here) or `slurm` (one Slurm array "
            "job, through submitit)", default="local", choices="apibank_bench.runs.executors:EXECUTORS",
            group="sweep"),
    Setting("slurm_partition", "the Slurm partition of the cells' jobs", default_text="the cluster's default",
            group="sweep"),
    Setting("slurm_time", "time limit of each cell's job, in minutes", _at_least(1), 240, group="sweep"),
    Setting("slurm_gpus", "GPUs of each cell's job (`--gpus-per-node`)", _at_least(0), group="sweep"),
    Setting("slurm_cpus", "CPUs of each cell's job (`--cpus-per-task`)", _at_least(1), group="sweep"),
    Setting("slurm_mem", "memory of each cell's job, as sbatch writes it (`32G`)", group="sweep",
            default_text="the cluster's default"),
    Setting("slurm_max_running", "cells of the array job running at once", _at_least(1), group="sweep",
            default_text="no limit"),
    Setting("slurm_sbatch", "further sbatch options as a JSON object, e.g. `{\"account\": \"lab\", \"qos\": "
            "\"high\"}`", parse_json_object, {}, default_text="-", group="sweep"),
    Setting("slurm_setup", "a shell command each cell's job runs first (e.g. `module load cuda`)", group="sweep"),
    Setting("endpoint_command", "a shell command each cell runs where it lands to start its own model server; it "
            "prints the server's base URL, which the cell uses, and is stopped when the cell ends "
            "(`$APIBANK_FREE_PORT` holds a free port)", group="sweep"),
    Setting("endpoint_wait", "seconds a cell waits for its endpoint command's server to answer", _at_least(1, float),
            900.0, group="sweep"),
)

#: The run and model settings (a run's RunConfig, the pytest options, the flags of `run`).
SETTINGS: tuple[Setting, ...] = tuple(setting for setting in TABLE if setting.group != "sweep")
#: Where a sweep's cells run (flags of `sweep`).
SWEEP_SETTINGS: tuple[Setting, ...] = tuple(setting for setting in TABLE if setting.group == "sweep")
BY_NAME = {setting.name: setting for setting in TABLE}
TEAM_SIZES = (2, 4, 8, 10)
RUN_DEFAULT_LIMIT = 2  #: `apibank-bench run` runs 2 instances unless told otherwise (`--limit 0` = all)


def run_limit(raw: Any) -> int | None:
    """The limit of `apibank-bench run` (and of each sweep cell) for a raw `--limit`: unset means
    RUN_DEFAULT_LIMIT instances, 0 means all (None)."""
    limit = RUN_DEFAULT_LIMIT if raw is None else BY_NAME["limit"].parse(raw)
    return limit or None


class _Base:
    """Derived values of a run's settings (the fields come from `SETTINGS`)."""

    @property
    def is_gold(self) -> bool:
        return self.model == "gold"

    @property
    def results_dir(self) -> str:
        # Another agent kind gets its own folder, so a resumed run never mixes kinds.
        plain = self.agent_kind == "chat" or self.topology == "agents_sdk"
        name = self.topology if plain else f"{self.topology}_{self.agent_kind}"
        return self.out_dir or os.path.join("results", "apibank", "gold" if self.is_gold else name)

    @property
    def instances_in_flight(self) -> int:
        """`concurrency`, else 32 for a remote endpoint and 1 for the embedded model (2 CPU cores
        serve one completion at a time) and the gold self-check (CPU-bound)."""
        if self.concurrency:
            return self.concurrency
        return 32 if self.base_url and not self.is_gold else 1

    @property
    def cache_root(self) -> Path:
        return Path(self.cache_dir).expanduser()

    def to_dict(self) -> dict[str, Any]:
        """The settings as `summary.json` records them: secrets left out, URL credentials masked."""
        from apibank_bench.core.redact import redact

        values = {s.name: getattr(self, s.name) for s in SETTINGS if not s.secret}
        values["base_url"] = [redact(url) for url in self.base_url]
        return values


RunConfig = make_dataclass(
    "RunConfig",
    [(s.name, Any, field(default_factory=lambda d=s.default: d.copy() if isinstance(d, (list, dict)) else d))
     for s in SETTINGS],
    bases=(_Base,), frozen=True,
)
RunConfig.__module__ = __name__
RunConfig.__doc__ = "One run's settings; build it with `resolve`."
SweepConfig = make_dataclass("SweepConfig", [(s.name, Any) for s in SWEEP_SETTINGS], frozen=True)
SweepConfig.__module__ = __name__
SweepConfig.__doc__ = "Where a sweep's cells run; build it with `resolve_sweep`."


# -- resolution ---------------------------------------------------------------------------

def _from_environment(setting: Setting, environ: Mapping[str, str]) -> tuple[Any, str] | None:
    """The raw value and the variable it came from, or None."""
    for name in setting.env_names:
        if environ.get(name, "").strip():
            return environ[name], name
    for name, convert in setting.deprecated_env.items():
        if environ.get(name, "").strip():
            replacement = setting.env_names[0]
            warnings.warn(f"{name} is deprecated and will be removed in the next release; use {replacement}",
                          DeprecationWarning, stacklevel=3)
            return convert(environ[name]), name
    return None


def _check(setting: Setting, value: Any, where: str) -> Any:
    allowed = setting.allowed() if setting.choices else None
    if allowed and value is not None and str(value) not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


# -- the words of the command the user typed ---------------------------------------------------

#: Set (to "command") while an `apibank-bench` command runs, and inherited by the pytest it starts
#: and that pytest's xdist workers: messages then name `run`'s flags (`--resume`), and under plain
#: pytest the pytest options (`--apibank-resume`).
VOICE_ENV = "APIBANK_VOICE"


def flag(name: str) -> str:
    """The flag of setting `name` as the user types it: `--NAME` under `apibank-bench`, else `--apibank-NAME`."""
    dashed = name.replace("_", "-")
    return f"--{dashed}" if os.environ.get(VOICE_ENV) == "command" else f"--apibank-{dashed}"


def spoken(option: str) -> str:
    """A `--apibank-NAME` option in the words of the typed command (anything else unchanged)."""
    return flag(option[len("--apibank-"):]) if option.startswith("--apibank-") else option


@contextmanager
def command_voice() -> Iterator[None]:
    """Messages name the command's flags while this lasts (the CLI wraps every command in it)."""
    old = os.environ.get(VOICE_ENV)
    os.environ[VOICE_ENV] = "command"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(VOICE_ENV, None)
        else:
            os.environ[VOICE_ENV] = old


def _given(setting: Setting, option_value: Callable[[Setting], Any], ini_value: Callable[[Setting], Any],
           environ: Mapping[str, str]) -> tuple[Any, str]:
    """The raw value of one setting and where it came from (None, "" where nothing sets it)."""
    raw, where = option_value(setting), flag(setting.name)
    if raw is None or raw == []:
        raw, where = ini_value(setting), f"ini {setting.dest}"
    if raw is None or raw == "" or raw == []:
        found = _from_environment(setting, environ)
        raw, where = found if found else (None, "")
    return raw, where


def given_names(option_value: Callable[[Setting], Any] = lambda s: None,
                ini_value: Callable[[Setting], Any] = lambda s: None,
                environ: Mapping[str, str] | None = None) -> set[str]:
    """The settings that the command line, the ini file or the environment set (the rest are defaults)."""
    environ = os.environ if environ is None else environ
    return {s.name for s in SETTINGS if _given(s, option_value, ini_value, environ)[0] is not None}


def resolve(option_value: Callable[[Setting], Any] = lambda s: None,
            ini_value: Callable[[Setting], Any] = lambda s: None,
            environ: Mapping[str, str] | None = None) -> RunConfig:
    """The run's settings: option, else ini, else environment, else default; each parsed and checked.

    Errors name the option (or the variable) the bad value came from.
    """
    values = _values(SETTINGS, option_value, ini_value, os.environ if environ is None else environ)
    cfg = RunConfig(**{name: (value.copy() if isinstance(value, (list, dict)) else value)
                       for name, value in values.items()})
    if cfg.topology != "single" and cfg.team_size not in TEAM_SIZES:
        raise ValueError(f"{flag('team_size')} must be one of {', '.join(map(str, TEAM_SIZES))}, got {cfg.team_size}")
    return cfg


def resolve_sweep(option_value: Callable[[Setting], Any] = lambda s: None,
                  environ: Mapping[str, str] | None = None) -> "SweepConfig":
    """The sweep settings: option, else environment, else default."""
    return SweepConfig(**_values(SWEEP_SETTINGS, option_value, lambda s: None,
                                 os.environ if environ is None else environ))


def _values(table: Iterable[Setting], option_value: Callable[[Setting], Any], ini_value: Callable[[Setting], Any],
            environ: Mapping[str, str]) -> dict[str, Any]:
    values = {}
    for setting in table:
        raw, where = _given(setting, option_value, ini_value, environ)
        try:
            value = setting.default if raw is None else setting.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        values[setting.name] = _check(setting, value, where)
    return values


def from_environment(environ: Mapping[str, str] | None = None, **overrides: Any) -> RunConfig:
    """Settings from the environment and defaults only (commands outside a run), with overrides."""
    return resolve(lambda s: overrides.get(s.name), environ=environ)


def value_from_environment(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting from the environment, else its default (for code that runs outside a run)."""
    setting = BY_NAME[name]
    found = _from_environment(setting, os.environ if environ is None else environ)
    return setting.default if found is None else setting.parse(found[0])


# -- what the table generates --------------------------------------------------------------

def add_pytest_options(parser) -> None:
    group = parser.getgroup("apibank", "API-Bank benchmark (also ini apibank_* and env APIBANK_*)")
    for setting in SETTINGS:
        if setting.flag:
            group.addoption(setting.option, action="store_const", const="true", dest=setting.dest, default=None,
                            help=setting.help)
            group.addoption("--apibank-no-" + setting.name.replace("_", "-"), action="store_const", const="false",
                            dest=setting.dest, help=f"turn off: {setting.help}")
        else:
            group.addoption(setting.option, dest=setting.dest, default=None,
                            nargs="+" if setting.many else None, help=setting.help)
        parser.addini(setting.dest, setting.help, default=None)


def add_command_flags(parser, skip: Iterable[str] = (), table: Iterable[Setting] = SETTINGS) -> None:
    """The settings of `table` as flags of a command (`--NAME`); unset flags stay None."""
    import argparse

    titles = {"run": "run settings", "model": "model settings (default: the embedded local model)",
              "sweep": "where the cells run"}
    groups = {}
    for setting in table:
        if setting.name in skip:
            continue
        flag = "--" + setting.name.replace("_", "-")
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(titles[setting.group])
        target = groups[setting.group]
        if setting.flag:
            target.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=setting.help)
        else:
            target.add_argument(flag, default=None, nargs="+" if setting.many else None, help=setting.help,
                                metavar=setting.name.upper())


def pytest_argv(values: Mapping[str, Any], prefix: str = "--apibank-") -> list[str]:
    """Options standing for the given (unparsed, non-None) setting values: `--apibank-NAME` for
    pytest, or with `prefix="--"` the flags of `apibank-bench run`."""
    argv: list[str] = []
    for setting in SETTINGS:
        value = values.get(setting.name)
        if value is None:
            continue
        option = prefix + setting.name.replace("_", "-")
        if setting.flag:
            argv.append(option if parse_bool(value) else prefix + "no-" + setting.name.replace("_", "-"))
        elif setting.many:
            argv += [option, *([value] if isinstance(value, str) else value)]
        else:
            argv += [option, str(value)]
    return argv


def markdown_table() -> str:
    """The README's options table."""
    lines = ["| option | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for setting in TABLE:
        choices = setting.allowed()
        meaning = setting.help + (f" (one of {', '.join(f'`{c}`' for c in choices)})" if choices else "")
        env = ", ".join(f"`{name}`" for name in setting.env_names)
        option = f"`sweep {setting.option}`" if setting.group == "sweep" else f"`{setting.option}`"
        lines.append(f"| {option} | {env} | {setting.readme_default()} | {meaning} |")
    return "\n".join(lines)


README_BLOCK = ("<!-- settings table: start -->\n", "\n<!-- settings table: end -->")


def write_readme_table(readme: Path) -> None:
    """Replace the table between the README's markers with the generated one."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_BLOCK[0]) + len(README_BLOCK[0]), text.index(README_BLOCK[1])
    readme.write_text(text[:start] + markdown_table() + text[end:], encoding="utf-8")


if __name__ == "__main__":  # python -m apibank_bench.core.settings [--write-readme]
    import sys

    if "--write-readme" in sys.argv:
        write_readme_table(Path(__file__).resolve().parents[2] / "README.md")
    else:
        print(markdown_table())
