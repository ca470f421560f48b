"""Resolution: a setting's value from the command line (a flag or a pytest option), else the ini file,
else the environment, else its default; each parsed and checked. This package is the only reader of
the environment: lower layers receive values. Rules that name things of a higher layer (the team
sizes of the topologies) are handed down by that layer (`hand_down_rule`)."""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace
from typing import AbstractSet, Any, Callable, Iterable, Mapping

from apibank_bench.core.settings.run_config import RUN_SETTINGS, RunConfig, _fresh
from apibank_bench.core.settings.setting import Setting
from apibank_bench.core.settings.table import BY_NAME, SETTINGS, SWEEP_SETTINGS
from apibank_bench.core.settings.voice import flag

#: Checks of a whole RunConfig that the layer owning what they name hands down (each raises ValueError).
_RULES: list[Callable[[RunConfig], None]] = []
#: What completes a resumed run's RunConfig (`--resume --out-dir DIR`) from elsewhere, given the names of the
#: settings the user set (the runs layer's: the folder's recorded settings for those not given).
_COMPLETIONS: list[Callable[[RunConfig, AbstractSet[str]], RunConfig]] = []


def hand_down_completion(complete: Callable[[RunConfig, AbstractSet[str]], RunConfig]) -> None:
    """`complete(cfg, given)` runs on every resumed run's RunConfig `resolve` makes, before the rules."""
    if complete not in _COMPLETIONS:
        _COMPLETIONS.append(complete)


def hand_down_rule(check: Callable[[RunConfig], None]) -> None:
    """`check(cfg)` runs on every RunConfig `resolve` makes; it raises ValueError naming the flag to change."""
    if check not in _RULES:
        _RULES.append(check)


def _from_environment(setting: Setting, environ: Mapping[str, str]) -> tuple[Any, str] | None:
    """The raw value and the variable it came from, or None."""
    for name in setting.env_names:
        if environ.get(name, "").strip():
            return environ[name], name
    for name, convert in setting.deprecated_env.items():
        if environ.get(name, "").strip():
            replacement = setting.env_names[0]
            warnings.warn(f"{name} is deprecated and will be removed in the next release; use {replacement}",
                          DeprecationWarning, stacklevel=4)
            return convert(environ[name]), name
    return None


def _check(setting: Setting, value: Any, where: str) -> Any:
    allowed = setting.allowed() if setting.choices else None
    if allowed and value is not None and str(value) not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _raw(setting: Setting, option_value: Callable[[Setting], Any], ini_value: Callable[[Setting], Any],
         environ: Mapping[str, str]) -> Any:
    """The raw value the option, the ini file or the environment gives one setting (None: nothing does)."""
    for raw in (option_value(setting), ini_value(setting)):
        if not (raw is None or raw == "" or raw == []):
            return raw
    found = _from_environment(setting, environ)
    return found[0] if found else None


def given_names(option_value: Callable[[Setting], Any] = lambda s: None,
                ini_value: Callable[[Setting], Any] = lambda s: None,
                environ: Mapping[str, str] | None = None) -> set[str]:
    """The settings that the command line, the ini file or the environment set (the rest are defaults)."""
    environ = os.environ if environ is None else environ
    return {s.name for s in RUN_SETTINGS if _raw(s, option_value, ini_value, environ) is not None}


def _resolve(chosen: Iterable[Setting], option_value: Callable[[Setting], Any], option_name: Callable[[Setting], str],
             ini_value: Callable[[Setting], Any], environ: Mapping[str, str] | None) -> dict[str, Any]:
    """{name: value} for the chosen settings: option, else ini, else environment, else default; each parsed
    and checked. Errors name the option (or the variable) the bad value came from."""
    environ = os.environ if environ is None else environ
    values = {}
    for setting in chosen:
        raw, where = option_value(setting), option_name(setting)
        if raw is None or raw == []:
            raw, where = ini_value(setting), f"ini {setting.dest}"
        if raw is None or raw == "" or raw == []:
            found = _from_environment(setting, environ)
            raw, where = found if found else (None, "")
        try:
            value = setting.default if raw is None else setting.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        values[setting.name] = _fresh(_check(setting, value, where))
    return values


def resolve(option_value: Callable[[Setting], Any] = lambda s: None,
            ini_value: Callable[[Setting], Any] = lambda s: None,
            environ: Mapping[str, str] | None = None, given: AbstractSet[str] | None = None) -> RunConfig:
    """A run's settings (pytest options: `option_value` answers for `--apibank-NAME`). `given`: the names of the
    settings the user set (default: those the options, the ini file or the environment give)."""
    cfg = RunConfig(**_resolve(RUN_SETTINGS, option_value, lambda s: flag(s.name), ini_value, environ))
    if _COMPLETIONS and cfg.resume and cfg.out_dir:
        names = given if given is not None else given_names(option_value, ini_value, environ)
        for complete in _COMPLETIONS:
            cfg = complete(cfg, names)
    return checked(cfg)


def checked(cfg: RunConfig) -> RunConfig:
    """`cfg` once the handed-down rules accept it (each raises ValueError naming the flag to change)."""
    for check in _RULES:
        check(cfg)
    return cfg


def from_environment(environ: Mapping[str, str] | None = None, **overrides: Any) -> RunConfig:
    """Settings from the environment and defaults only (commands outside a run), with overrides."""
    return resolve(lambda s: overrides.get(s.name), environ=environ)


def value_from_environment(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting from the environment, else its default (for code that runs outside a run)."""
    setting = BY_NAME[name]
    found = _from_environment(setting, os.environ if environ is None else environ)
    return setting.default if found is None else setting.parse(found[0])



def of_command(command: str) -> tuple[Setting, ...]:
    """The settings a command takes as flags, in the table's order."""
    return tuple(setting for setting in SETTINGS if command in setting.commands)


def command_values(args: Any, command: str, environ: Mapping[str, str] | None = None,
                   **given: Any) -> SimpleNamespace:
    """A command's settings from its parsed flags (`add_command_flags`), else the environment, else the
    defaults; `given` stands in for flags the command fills itself."""
    def flag(setting: Setting) -> Any:
        return given[setting.name] if setting.name in given else getattr(args, setting.name, None)

    values = _resolve(of_command(command), flag, lambda s: s.flag_name, lambda s: None, environ)
    return SimpleNamespace(**values)


def resolve_sweep(option_value: Callable[[Setting], Any] = lambda s: None,
                  environ: Mapping[str, str] | None = None) -> SimpleNamespace:
    """Where a sweep's cells run: flag, else environment, else default."""
    return SimpleNamespace(**_resolve(SWEEP_SETTINGS, option_value, lambda s: s.flag_name, lambda s: None, environ))


def value_of(args: Any, name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting of a command: its flag, else the environment, else the default."""
    setting = BY_NAME[name]
    return _resolve((setting,), lambda s: getattr(args, s.name, None), lambda s: s.flag_name, lambda s: None,
                    environ)[name]


def run_config_of(args: Any, environ: Mapping[str, str] | None = None, **given: Any) -> RunConfig:
    """A run's settings from a command's flags (errors name the command's `--NAME`)."""
    def flag(setting: Setting) -> Any:
        return given[setting.name] if setting.name in given else getattr(args, setting.name, None)

    try:  # what the user set: the flags and the environment, not what the command fills in itself
        return resolve(flag, environ=environ, given=given_names(lambda s: getattr(args, s.name, None), environ=environ))
    except ValueError as exc:
        raise ValueError(str(exc).replace("--apibank-", "--")) from None


