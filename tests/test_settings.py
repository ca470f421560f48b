"""The settings table: precedence, parsing, checked values, deprecated names, and everything derived from it."""

import argparse
import os
import re
import warnings
from pathlib import Path

import pytest

from apibank_bench.core import settings
from apibank_bench.runs.naming import results_dir
from apibank_bench.llm.config import model_config
from apibank_bench.cli import build_parser
from helpers import write_gguf
from apibank_bench.commands.run import pytest_args, run_settings
from apibank_bench.llm import ModelConfig

README = Path(__file__).resolve().parents[1] / "docs" / "settings.md"  # the generated settings table's page


def resolve(options=None, ini=None, env=None):
    options, ini = options or {}, ini or {}
    return settings.resolve(lambda s: options.get(s.name), lambda s: ini.get(s.name), environ=env or {})


def test_defaults():
    cfg = resolve()
    assert (cfg.level, cfg.topology, cfg.team_size, cfg.rounds, cfg.message_format) == ("all", "single", 4, 2, "freeform")
    assert cfg.cache is True and cfg.constrained is None and cfg.limit is None
    assert (cfg.temperature, cfg.top_p, cfg.max_tokens, cfg.timeout, cfg.max_retries) == (0.2, 0.9, 1024, 600.0, 5)
    assert results_dir(cfg).endswith("results/apibank/embedded/single")
    assert cfg.cache_root == Path("~/.cache/apibank-bench").expanduser()


def test_option_over_ini_over_environment():
    env = {"APIBANK_LIMIT": "7", "APIBANK_TOPOLOGY": "sequential", "APIBANK_CONSTRAINED": "false"}
    cfg = resolve(ini={"topology": "centralized"}, env=env)
    assert (cfg.limit, cfg.topology, cfg.constrained) == (7, "centralized", False)
    cfg = resolve(options={"topology": "independent", "limit": "3"}, ini={"topology": "centralized"}, env=env)
    assert (cfg.limit, cfg.topology) == (3, "independent")


def test_lists_shards_and_gold():
    cfg = resolve(options={"shard": "2/3", "model": "gold", "only": ["x,y", "z"]},
                  env={"APIBANK_BASE_URL": "http://a/v1/, http://b/v1"})
    assert cfg.base_url == ["http://a/v1", "http://b/v1"]
    assert cfg.shard == (2, 3) and cfg.only == ["x", "y", "z"]
    assert cfg.is_gold and results_dir(cfg).endswith("results/apibank/gold")


def test_openai_variables_and_secrets():
    cfg = resolve(env={"OPENAI_BASE_URL": "http://o/v1", "OPENAI_API_KEY": "sk-secret", "APIBANK_MODEL": "m"})
    assert cfg.base_url == ["http://o/v1"] and cfg.api_key == "sk-secret"
    assert "api_key" not in cfg.to_dict() and "sk-secret" not in repr(cfg.to_dict())
    recorded = resolve(options={"base_url": "http://user:hunter2@host:9/v1", "model": "m"}).to_dict()["base_url"]
    assert recorded == ["http://***@host:9/v1"]
    # APIBANK_BASE_URL comes before the OpenAI client's own variable.
    assert resolve(env={"OPENAI_BASE_URL": "http://o/v1", "APIBANK_BASE_URL": "http://a/v1", "APIBANK_MODEL": "m"}
                   ).base_url == ["http://a/v1"]


def test_max_consecutive_errors_is_deprecated_and_only_its_0_still_turns_the_breaker_off():
    from apibank_bench.llm.config import down_after

    with pytest.warns(DeprecationWarning, match="--apibank-max-consecutive-errors is deprecated.*0 still turns"):
        assert down_after(resolve(options={"max_consecutive_errors": "0"})) == 0.0
    with pytest.warns(DeprecationWarning, match="--apibank-max-consecutive-errors is deprecated.*count is ignored"):
        assert down_after(resolve(options={"max_consecutive_errors": "5", "down_after": "7"})) == 7.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert down_after(resolve(options={"down_after": "0"})) == 0.0  # what the suite's own tests use


def test_deprecated_names_still_work_with_a_warning():
    with pytest.warns(DeprecationWarning, match="APIBANK_BASE_URLS is deprecated.*APIBANK_BASE_URL"):
        assert resolve(env={"APIBANK_BASE_URLS": "http://a/v1,http://b/v1", "APIBANK_MODEL": "m"}
                       ).base_url == ["http://a/v1", "http://b/v1"]
    with pytest.warns(DeprecationWarning, match="APIBANK_NO_CACHE"):
        assert resolve(env={"APIBANK_NO_CACHE": "1"}).cache is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve(env={"APIBANK_CACHE": "0", "APIBANK_NO_CACHE": "0"}).cache is False  # the new name wins


@pytest.mark.parametrize("options, named", [
    ({"shard": "3/2"}, "--apibank-shard"), ({"shard": "x"}, "--apibank-shard"), ({"topology": "ring"}, "--apibank-topology"),
    ({"team_size": "3", "topology": "independent"}, "--apibank-team-size"), ({"level": "4"}, "--apibank-level"),
    ({"cache": "maybe"}, "--apibank-cache"), ({"limit": "-1"}, "--apibank-limit"), ({"offset": "-2"}, "--apibank-offset"),
    ({"extra_body": "[1]"}, "--apibank-extra-body"), ({"max_in_flight": "0"}, "--apibank-max-in-flight"),
    ({"toolsearcher_scorer": "nope"}, "--apibank-toolsearcher-scorer"), ({"server_kind": "tgi"}, "--apibank-server-kind"),
])
def test_bad_values_are_refused_naming_the_option(options, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        resolve(options=options)


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ValueError, match="APIBANK_SEED"):
        resolve(env={"APIBANK_SEED": "x"})


def test_registries_give_the_choices():
    assert {"single", "independent", "decentralized", "centralized", "sequential"} <= set(
        settings.BY_NAME["topology"].allowed())
    assert settings.BY_NAME["toolsearcher_scorer"].allowed()[:3] == ("official", "upstream", "keyword")
    assert resolve(options={"toolsearcher_scorer": "frozen"}).toolsearcher_scorer == "frozen"  # an alias


def test_model_config_comes_from_the_run_settings(tmp_path):
    cfg = resolve(options={"base_url": "http://a/v1", "model": "m", "temperature": "0", "max_in_flight": "3",
                           "extra_body": '{"x": 1}', "cache_dir": str(tmp_path), "server_kind": "vllm"})
    model = model_config(cfg)
    assert isinstance(model, ModelConfig)
    assert (model.base_urls, model.model, model.temperature, model.max_in_flight) == (["http://a/v1"], "m", 0.0, 3)
    assert model.extra_body == {"x": 1} and model.cache_dir == tmp_path / "responses"
    assert model.constrained is False and not model.fold_system  # remote: no grammar unless asked
    local = model_config(resolve(), local_url="http://127.0.0.1:9/v1")
    assert local.constrained is True and local.fold_system and local.model
    assert model_config(resolve(options={"base_url": "http://a/v1", "model": "m", "cache": "0"})).cache_dir is None
    with pytest.raises(ValueError, match="no model name: pass --apibank-model"):
        resolve(options={"base_url": "http://a/v1"})  # the settings refuse it: agents.models.check_model_and_endpoint


@pytest.mark.parametrize("model", ["my-qwen-7b", "Qwen/Qwen3-8B"])
def test_a_model_name_without_an_endpoint_is_refused_naming_the_flag_and_the_embedded_models_name(model):
    from apibank_bench.llm.embedded_launcher import LOCAL_MODEL

    with pytest.raises(ValueError) as refused:
        resolve(options={"model": model})
    message = str(refused.value)
    assert f"--apibank-model {model} names no endpoint" in message and "--apibank-base-url URL" in message
    assert f"the embedded model answers, whose name is {LOCAL_MODEL}" in message
    assert resolve(options={"model": model, "base_url": "http://a/v1"}).model == model  # with its endpoint: fine


@pytest.mark.parametrize("model", [None, "gold", "embedded", "embedded:gemma", "local:{gguf}"])
def test_the_embedded_models_own_names_need_no_endpoint(model, tmp_path):
    from apibank_bench.llm.embedded_launcher import LOCAL_MODEL

    gguf = write_gguf(tmp_path / "mine.gguf", {"general.name": "Mine", "tokenizer.chat_template": "{{ x }}"})
    for name in (model and model.format(gguf=gguf), LOCAL_MODEL):
        assert resolve(options={"model": name, "cache_dir": str(tmp_path)}).base_url == []


@pytest.mark.parametrize("kind, grammar", [("vllm", True), ("vllm-structured", True), ("llama.cpp", True),
                                           ("sglang", False), ("openai", False)])
def test_a_remote_endpoint_gets_a_grammar_only_with_constrained_where_its_kind_takes_one(kind, grammar):
    """The reference sends its vLLM server no grammar, so a remote run's default sends none; `--constrained` sends
    it where the server kind has a grammar field (the recipe of docs/servers.md)."""
    options = {"base_url": "http://a/v1", "model": "m", "server_kind": kind}
    assert model_config(resolve(options=options)).use_grammar is False
    assert model_config(resolve(options={**options, "constrained": "1"})).use_grammar is grammar


def _table_in_readme() -> str:
    text = README.read_text(encoding="utf-8")
    start, end = (re.escape(marker) for marker in settings.README_BLOCK)
    match = re.search(f"{start}(.*?){end}", text, re.S)
    assert match, "docs/settings.md has no generated settings table"
    return match.group(1)


def test_readme_table_is_the_settings_table():
    assert _table_in_readme() == settings.markdown_table(), \
        "regenerate it: python -m apibank_bench.runs.setting_rules --write-docs"


def test_every_run_setting_is_a_pytest_option_and_an_ini_key(pytestconfig):
    for setting in settings.RUN_SETTINGS:
        assert pytestconfig.getoption(setting.dest, "missing") != "missing", setting.option
        assert pytestconfig.getini(setting.dest) is None  # declared, unset


def test_sweep_settings_are_flags_of_sweep_only_and_read_the_environment(pytestconfig):
    sub = argparse.ArgumentParser().add_subparsers()
    from apibank_bench.commands import sweep as sweep_command

    sweep_command.register(sub)
    args = sub.choices["sweep"].parse_args(["--out", "d", "--executor", "slurm", "--slurm-gpus", "2",
                                            "--slurm-sbatch", '{"qos": "high"}'])
    given = settings.resolve_sweep(lambda s: getattr(args, s.name), environ={"APIBANK_SLURM_PARTITION": "gpu"})
    assert (given.executor, given.slurm_gpus, given.slurm_sbatch, given.slurm_partition) == \
        ("slurm", 2, {"qos": "high"}, "gpu")
    assert given.slurm_time == 240 and given.endpoint_command is None
    for setting in settings.SWEEP_SETTINGS:
        assert pytestconfig.getoption(setting.dest, "missing") == "missing", setting.name  # not a run's option
        assert setting.name not in {s.name for s in settings.RUN_SETTINGS}
    with pytest.raises(ValueError, match="--executor: 'ray' is not one of local, slurm"):
        settings.resolve_sweep(lambda s: {"executor": "ray"}.get(s.name))


def test_run_hands_pytest_the_resolved_settings_not_options():
    parser = build_parser("run")
    args = parser.parse_args(["run", "--topology", "decentralized", "--team-size", "8", "--rounds", "1",
                              "--limit", "5", "--model", "m", "--base-url", "http://a/v1", "http://b/v1",
                              "--no-constrained", "--temperature", "0", "--batch", "-n", "2"])
    argv = pytest_args(args)
    assert argv[:2] == ["--pyargs", "apibank_bench.bench"]  # the package's benchmark module, from any folder
    passed = argv[2:]
    assert passed[:2] == ["-n", "2"] and not [arg for arg in passed if arg.startswith("--apibank-")]  # nothing to parse again
    cfg = run_settings(args)
    assert (cfg.topology, cfg.team_size, cfg.rounds, cfg.limit, cfg.model) == ("decentralized", 8, 1, 5, "m")
    assert cfg.base_url == ["http://a/v1", "http://b/v1"] and cfg.constrained is False and cfg.temperature == 0.0
    assert run_settings(parser.parse_args(["run"])).limit == 2  # `run` runs 2 instances by default
    assert run_settings(parser.parse_args(["run", "--limit", "0"])).limit is None  # 0 = all
    assert settings.from_record(cfg.to_record()) == cfg  # what an xdist worker rebuilds, unparsed


def test_xdist_workers_of_run_get_the_settings_it_resolved(tmp_path, apibank_root):
    """`run` passes pytest no settings options: each worker gets the controller's settings in workerinput."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "gold"
    done = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", "gold", "--limit", "4", "-n", "2",
                           "--out-dir", str(out), "--root", str(apibank_root)], capture_output=True, text=True,
                          env={**os.environ, "APIBANK_MODEL": "not-gold"}, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 4 and all(row["correct"] for row in rows)  # gold answers: the flag, not the environment
    recorded = json.loads((out / "summary.json").read_text(encoding="utf-8"))["config"]["run"]
    assert (recorded["model"], recorded["limit"], recorded["out_dir"]) == ("gold", 4, str(out))


def test_parts_register_in_name_order_whatever_order_the_file_system_lists(tmp_path, monkeypatch):
    # CI once listed executors/slurm.py before local.py, and the README's table (and an
    # error message) changed with it: registration must not follow the directory order.
    import sys
    from apibank_bench.core import registry

    package = tmp_path / "parts_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("ORDER = []\n")
    for name in ("alpha", "beta", "gamma"):
        (package / f"{name}.py").write_text(f"from parts_pkg import ORDER\nORDER.append({name!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = registry.pkgutil.iter_modules
    monkeypatch.setattr(registry.pkgutil, "iter_modules", lambda path: list(listed(path))[::-1])
    import parts_pkg

    try:
        registry.import_submodules("parts_pkg", parts_pkg.__path__, skip=("beta",))
        assert parts_pkg.ORDER == ["alpha", "gamma"]
    finally:
        for name in [n for n in sys.modules if n == "parts_pkg" or n.startswith("parts_pkg.")]:
            del sys.modules[name]


def test_executors_are_listed_by_name_whichever_engine_was_imported_first():
    # In CI's full run a test imported executors/slurm.py before anything read the registry, so slurm
    # registered first and the README's table and the choices message changed: a fresh process proves it.
    import subprocess
    import sys

    code = ("import apibank_bench.sweeps.executors.slurm\n"
            "from apibank_bench.sweeps.executors import EXECUTORS\n"
            "print(','.join(EXECUTORS.names()))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "local,slurm"


def test_run_turns_off_pytests_log_capture_unless_given_its_options():
    parser = build_parser("run")
    assert "no:logging" in pytest_args(parser.parse_args(["run"]))
    for extra in (["--log-cli-level=DEBUG"], ["-o", "log_cli=true"], ["--show-capture", "log"]):
        argv = pytest_args(parser.parse_args(["run", "--", *extra]))
        assert "no:logging" not in argv and argv[-len(extra):] == extra, extra


def _kinds(annotation) -> set:
    """The runtime classes a field's annotation admits (`int | None` -> {int, NoneType}, `list[str]` -> {list})."""
    import types
    import typing

    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return {kind for arg in typing.get_args(annotation) for kind in _kinds(arg)}
    return {typing.get_origin(annotation) or annotation}


def _parsed_kind(setting) -> type:
    """What a setting's parser gives: its return annotation, or the builtin type it is."""
    import typing

    if setting.parse in (int, float, str):
        return setting.parse
    returned = typing.get_type_hints(setting.parse)["return"]
    return typing.get_origin(returned) or returned


def test_runconfig_and_the_table_agree_field_for_row():
    """Each run setting is declared once, as a typed RunConfig field carrying its row: the table's run rows are
    the fields in order, and each field's type admits its default and what its parser, switch or choices give."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(settings.RunConfig)
    fields = dataclasses.fields(settings.RunConfig)
    assert [s.name for s in settings.RUN_SETTINGS] == [f.name for f in fields] == list(hints)
    assert settings.SETTINGS[:len(fields)] == settings.RUN_SETTINGS
    assert all(s.of_run for s in settings.RUN_SETTINGS) and not any(s.of_run for s in settings.COMMAND_SETTINGS)
    cfg = settings.RunConfig()
    for setting in settings.RUN_SETTINGS:
        kinds = _kinds(hints[setting.name])
        assert type(getattr(cfg, setting.name)) in kinds and type(setting.default) in kinds, setting.name
        assert _parsed_kind(setting) in kinds, setting.name
        if setting.flag:
            assert bool in kinds, setting.name
        if setting.many:
            assert list in kinds, setting.name
        if setting.choices:
            assert str in kinds, setting.name


def test_the_agreement_check_fails_for_a_mistyped_field(monkeypatch):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Mistyped(settings.RunConfig):
        team_size: str = settings.RunConfig.__dataclass_fields__["team_size"].default  # declared a str: wrong

    monkeypatch.setattr(settings, "RunConfig", Mistyped)
    with pytest.raises(AssertionError, match="team_size"):
        test_runconfig_and_the_table_agree_field_for_row()


def test_runconfig_is_frozen_and_its_list_defaults_are_not_shared():
    import dataclasses

    first, second = settings.RunConfig(), settings.RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.topology = "independent"  # type: ignore[misc]
    first.only.append("x")
    assert second.only == [] and settings.BY_NAME["only"].default == []


def test_fixed_choices_in_core_are_the_owning_layers_names():
    """Choices core declares as plain names agree with the registries that own them."""
    from apibank_bench.llm.config import SERVER_CHOICES
    from apibank_bench.optimize.methods import METHODS
    from apibank_bench.sweeps.executors import EXECUTORS

    assert settings.BY_NAME["server_kind"].allowed() == settings.SERVER_KINDS == SERVER_CHOICES
    assert settings.BY_NAME["method"].allowed() == settings.METHODS == tuple(METHODS.names())
    assert settings.BY_NAME["executor"].allowed() == settings.EXECUTORS == tuple(EXECUTORS.names())


def test_handed_down_choices_are_required_and_come_from_the_registries(monkeypatch):
    from apibank_bench.agents.kinds import AGENT_KINDS
    from apibank_bench.agents.topologies import TOPOLOGIES
    from apibank_bench.core.settings import setting as setting_module

    assert settings.BY_NAME["topology"].allowed() == tuple(TOPOLOGIES.names())
    assert settings.BY_NAME["agent_kind"].allowed() == tuple(AGENT_KINDS.names())
    monkeypatch.delitem(setting_module._CHOICE_SOURCES, "topology")
    with pytest.raises(LookupError, match="--topology are handed down"):
        resolve(options={"topology": "independent"})  # never unchecked


def test_the_team_size_rule_is_the_topologies():
    from apibank_bench.agents.topologies import TEAM_SIZES, check_team_size

    check_team_size(settings.RunConfig(topology="independent", team_size=TEAM_SIZES[0]))
    with pytest.raises(ValueError, match="team-size must be one of 2, 4, 8, 10, got 3"):
        check_team_size(settings.RunConfig(topology="independent", team_size=3))
    assert resolve(options={"team_size": "3"}).team_size == 3  # one agent: no team to size


def test_the_table_command_writes_any_markdown_file_with_the_markers(tmp_path):
    import subprocess
    import sys

    page = tmp_path / "settings.md"
    page.write_text("# Settings\n\n" + settings.README_BLOCK[0] + "old" + settings.README_BLOCK[1] + "\n\nafter\n")
    subprocess.run([sys.executable, "-m", "apibank_bench.runs.setting_rules", "--write", str(page)], check=True)
    text = page.read_text()
    assert text == ("# Settings\n\n" + settings.README_BLOCK[0] + settings.markdown_table() + settings.README_BLOCK[1]
                    + "\n\nafter\n")


def test_no_import_hands_down_the_choices_each_composition_root_calls_for_them():
    """Importing the runs layer, the plugin or the CLI hands nothing down; the CLI's `main` does, by one call."""
    import subprocess
    import sys

    code = ("import apibank_bench.runs, apibank_bench.plugin, apibank_bench.cli\n"
            "from apibank_bench.core.settings import setting\n"
            "print(sorted(setting._CHOICE_SOURCES))\n"
            "try:\n    apibank_bench.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(setting._CHOICE_SOURCES))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "[]"
    from apibank_bench.core.paths import PROJECT_ROOT

    side_effects = [str(path) for path in (PROJECT_ROOT / "apibank_bench").rglob("*.py")
                    if re.search(r"^\s*import apibank_bench\.runs\b", path.read_text(encoding="utf-8"), flags=re.M)]
    assert side_effects == []  # an import kept only for what importing does
    assert lines[-1] == "['agent_kind', 'toolsearcher_scorer', 'topology']"


def test_the_voice_is_a_value_a_worker_takes_from_its_controller(monkeypatch):
    """Messages speak `run`'s flags under the CLI; an xdist worker gets that voice in `workerinput`, not
    through the environment."""
    from types import SimpleNamespace

    from apibank_bench.plugin.options import SETTINGS_KEY, VOICE_KEY, resolve_settings

    monkeypatch.delenv("APIBANK_VOICE", raising=False)
    assert settings.flag("resume") == "--apibank-resume"
    with settings.command_voice():
        assert settings.flag("resume") == "--resume" and "APIBANK_VOICE" not in os.environ
    assert settings.voice() == "pytest"
    worker = SimpleNamespace(workerinput={SETTINGS_KEY: settings.RunConfig(model="gold").to_record(),
                                          VOICE_KEY: "command"},
                             pluginmanager=SimpleNamespace(get_plugins=lambda: []))
    try:
        assert resolve_settings(worker).model == "gold"
        assert settings.flag("resume") == "--resume"
    finally:
        settings.use_voice("pytest")
