"""Every command's settings come from the one table: its flags, the pytest options, the environment
variables it reads and the README's table are all derived from `core/settings.py`, for every command."""

from __future__ import annotations

import argparse
import ast

import pytest

from apibank_bench.cli import build_parser
from apibank_bench.core import settings
from apibank_bench.core.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "apibank_bench"


def leaf_parsers(parser: argparse.ArgumentParser, path=()):
    """(command path, parser) for every runnable (sub)command, e.g. (("data", "fetch"), parser)."""
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaf_parsers(child, (*path, name))


def commands() -> dict[str, list[argparse.ArgumentParser]]:
    """The table's command names (`data`, not `data fetch`) and their parsers."""
    found: dict[str, list[argparse.ArgumentParser]] = {}
    for path, parser in leaf_parsers(build_parser()):
        found.setdefault(path[0], []).append(parser)
    return found


def test_each_command_takes_exactly_its_settings_from_the_table_with_one_spelling():
    spelled = {setting.flag_name: setting for setting in settings.SETTINGS}
    table_commands = {command for setting in settings.SETTINGS for command in setting.commands}
    assert table_commands <= set(commands()), "the table names a command the CLI does not have"
    for command, parsers in commands().items():
        taken = set()
        for parser in parsers:
            for action in parser._actions:
                name = getattr(action, settings.FROM_TABLE, None)
                if name is None:  # the command's own argument: no setting's spelling, no pytest spelling
                    clash = [flag for flag in action.option_strings if flag in spelled or flag.startswith("--apibank-")]
                    assert not clash, f"`{command}` declares {clash} itself; it belongs to the settings table"
                    continue
                assert command in settings.BY_NAME[name].commands
                assert settings.BY_NAME[name].flag_name in action.option_strings
                taken.add(name)
        assert taken == {setting.name for setting in settings.of_command(command)}, command


def sample(setting: settings.Setting) -> str:
    """A valid raw value of a setting that differs from its default where it can."""
    allowed = setting.allowed() if setting.choices else None
    if allowed:
        return next((choice for choice in allowed if choice != setting.default), allowed[0])
    if setting.flag:
        return "false" if setting.default else "true"
    if setting.parse is settings.parse_shard:
        return "1/2"
    if setting.parse is settings.parse_json_object:
        return '{"k": 1}'
    if setting.name == "model_aliases":
        return "qwen=org/model"
    if setting.name == "model_role":
        return "final=org/model@http://x/v1"
    if setting.name == "price":
        return "org/model=0.5/1.5"
    if setting.parse in (str, settings.parse_list, settings.parse_urls):
        return "http://x/v1" if setting.parse is settings.parse_urls else "some-value"
    for number in ("3", "0.5"):  # a count, else a fraction (a significance level)
        try:
            setting.parse(number)
            return number
        except ValueError:
            continue
    raise AssertionError(f"no sample value for {setting.name}")


@pytest.mark.parametrize("command", sorted(commands()))
def test_a_commands_settings_come_from_its_flags_else_the_environment_else_the_default(command):
    for setting in settings.of_command(command):
        args = argparse.Namespace()
        defaults = settings.command_values(args, command, environ={})
        assert getattr(defaults, setting.name) == setting.default, setting.name
        from_env = settings.command_values(args, command, environ={setting.env_names[0]: sample(setting)})
        expected = setting.parse(sample(setting))
        assert getattr(from_env, setting.name) == expected, setting.name
        flagged = argparse.Namespace(**{setting.name: sample(setting)})
        over = settings.command_values(flagged, command, environ={setting.env_names[0]: "@@not-valid@@"}
                                       if not setting.choices else {})
        assert getattr(over, setting.name) == expected, setting.name


def test_pytest_options_are_the_run_settings_and_nothing_else(pytestconfig):
    for setting in settings.SETTINGS:
        present = pytestconfig.getoption(setting.dest, "missing") != "missing"
        assert present == setting.of_run, setting.option
    assert [s.name for s in settings.RUN_SETTINGS] == [field for field in settings.RunConfig.__dataclass_fields__]


def test_every_setting_has_a_role_and_its_environment_variable():
    for setting in settings.SETTINGS:
        assert setting.role in settings.ROLES
        assert setting.env_names[0] == "APIBANK_" + setting.name.upper()
    # what may differ between two parts of one run, and what selects its instances, are roles of the table
    assert {"base_url", "concurrency", "cache", "root"} <= set(settings.names_with_role(settings.OPERATIONAL))
    assert {name for name in settings.names_with_role(settings.SELECTION) if settings.BY_NAME[name].of_run} == \
        {"level", "limit", "offset", "only", "shard"}


def _environment_uses(tree: ast.AST):
    """(line, what) for each read or write of a variable of os.environ / os.getenv."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "getenv":
            yield node.lineno, "os.getenv"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "environ":
            yield node.lineno, f"os.environ.{node.func.attr}"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            yield node.lineno, "os.environ[...]"


def test_only_the_resolver_reads_or_sets_environment_variables():
    """Other modules may hand the whole environment to a child process, never read or set a variable."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "core" / "settings.py":
            continue
        for line, what in _environment_uses(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(PROJECT_ROOT)}:{line} {what}")
    assert found == []


def test_the_readme_documents_every_setting_of_every_command():
    text = (PROJECT_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    table = text.split(settings.README_BLOCK[0], 1)[1].split(settings.README_BLOCK[1], 1)[0]
    assert table == settings.markdown_table()
    rows = {row.split("|")[1].strip().split(",")[0].strip("` ") : row for row in table.splitlines()[2:]}
    for setting in settings.SETTINGS:
        row = rows[setting.flag_name]
        assert all(f"`{name}`" in row for name in setting.env_names) and setting.role in row
        assert all(command in row for command in setting.commands)
        assert (setting.option in row) == setting.of_run


def test_which_differences_matter_is_read_from_the_roles():
    recorded = settings.from_environment({}).to_dict()
    changed = {**recorded, "concurrency": 7, "base_url": ["http://elsewhere/v1"], "limit": 5, "temperature": 0.9}
    found = settings.differences(recorded, changed)
    assert found == {settings.MEASUREMENT: ["temperature"], settings.SELECTION: ["limit"]}
