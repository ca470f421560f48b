"""What the settings table generates: the pytest options, every command's flags, the options that stand
for given values, and the docs' settings table (`python -m apibank_bench.runs.setting_rules --write FILE`,
where the choices the layers hand down are known)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from apibank_bench.core.settings.parsers import parse_bool
from apibank_bench.core.settings.run_config import RUN_SETTINGS
from apibank_bench.core.settings.table import SETTINGS
from apibank_bench.core.settings.resolve import of_command

def add_pytest_options(parser) -> None:
    group = parser.getgroup("apibank", "API-Bank benchmark (also ini apibank_* and env APIBANK_*)")
    for setting in RUN_SETTINGS:
        if setting.flag:
            group.addoption(setting.option, action="store_const", const="true", dest=setting.dest, default=None,
                            help=setting.help)
            group.addoption("--apibank-no-" + setting.name.replace("_", "-"), action="store_const", const="false",
                            dest=setting.dest, help=f"turn off: {setting.help}")
        else:
            group.addoption(setting.option, dest=setting.dest, default=None,
                            nargs="+" if setting.many else None, help=setting.help,
                            **({"action": "extend"} if setting.repeat else {}))
        parser.addini(setting.dest, setting.help, default=None)


#: Marks the argparse actions the table made (a test checks that commands declare no others for settings).
FROM_TABLE = "apibank_setting"


def add_command_flags(parser, command: str, skip: Iterable[str] = ()) -> None:
    """The command's settings as its flags (`--NAME`, the same in every command); unset flags stay None."""
    import argparse  # here: importing the settings costs a command that builds no parser nothing more

    groups: dict[str, Any] = {}
    titles = {"run": "settings", "model": "model settings (default: the embedded local model)",
              "sweep": "where the cells run"}
    for setting in of_command(command):
        if setting.name in skip:
            continue
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(titles[setting.group])
        names = [setting.flag_name] + ([setting.short] if setting.short else [])
        if setting.flag:
            action = groups[setting.group].add_argument(*names, action=argparse.BooleanOptionalAction, default=None,
                                                        help=setting.help)
        else:
            action = groups[setting.group].add_argument(*names, default=None, nargs="+" if setting.many else None,
                                                        help=setting.help, metavar=setting.name.upper(),
                                                        **({"action": "extend"} if setting.repeat else {}))
        setattr(action, FROM_TABLE, setting.name)


def pytest_argv(values: Mapping[str, Any], prefix: str = "--apibank-") -> list[str]:
    """Options standing for the given (unparsed, non-None) setting values: `--apibank-NAME` for
    pytest, or with `prefix="--"` the flags of `apibank-bench run`."""
    argv: list[str] = []
    for setting in SETTINGS:
        value = values.get(setting.name)
        if value is None or (prefix != "--" and not setting.of_run):
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
    """The docs' settings table (docs/settings.md)."""
    lines = ["| flag | pytest option | environment | default | role | commands | meaning |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for setting in SETTINGS:
        choices = setting.allowed()
        meaning = setting.help + (f" (one of {', '.join(f'`{c}`' for c in choices)})" if choices else "")
        env = ", ".join(f"`{name}`" for name in setting.env_names)
        flag = f"`{setting.flag_name}`" + (f", `{setting.short}`" if setting.short else "")
        option = f"`{setting.option}`" if setting.of_run else "-"
        commands = ", ".join(setting.commands)
        lines.append(f"| {flag} | {option} | {env} | {setting.readme_default()} | {setting.role} | {commands} "
                     f"| {meaning} |")
    return "\n".join(lines)


README_BLOCK = ("<!-- settings table: start -->\n", "\n<!-- settings table: end -->")


def write_readme_table(readme: Path) -> None:
    """Replace the table between the markers (`README_BLOCK`) of a markdown file with the generated one."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_BLOCK[0]) + len(README_BLOCK[0]), text.index(README_BLOCK[1])
    readme.write_text(text[:start] + markdown_table() + text[end:], encoding="utf-8")

