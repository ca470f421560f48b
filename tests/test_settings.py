"""The settings table: precedence, parsing, checked values, deprecated names, and everything derived from it."""

import argparse
import re
import warnings
from pathlib import Path

import pytest

from apibank_bench.core import settings
from apibank_bench.agents.models import model_config
from apibank_bench.commands.run import pytest_args, register
from apibank_bench.llm import ModelConfig

README = Path(__file__).resolve().parents[1] / "README.md"


def resolve(options=None, ini=None, env=None):
    options, ini = options or {}, ini or {}
    return settings.resolve(lambda s: options.get(s.name), lambda s: ini.get(s.name), environ=env or {})


def test_defaults():
    cfg = resolve()
    assert (cfg.level, cfg.topology, cfg.team_size, cfg.rounds, cfg.message_format) == ("all", "single", 4, 2, "freeform")
    assert cfg.cache is True and cfg.constrained is None and cfg.limit is None
    assert (cfg.temperature, cfg.top_p, cfg.max_tokens, cfg.timeout, cfg.max_retries) == (0.2, 0.9, 1024, 60.0, 5)
    assert cfg.results_dir.endswith("results/apibank/embedded/single")
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
    assert cfg.is_gold and cfg.results_dir.endswith("results/apibank/gold")


def test_openai_variables_and_secrets():
    cfg = resolve(env={"OPENAI_BASE_URL": "http://o/v1", "OPENAI_API_KEY": "sk-secret"})
    assert cfg.base_url == ["http://o/v1"] and cfg.api_key == "sk-secret"
    assert "api_key" not in cfg.to_dict() and "sk-secret" not in repr(cfg.to_dict())
    recorded = resolve(options={"base_url": "http://user:hunter2@host:9/v1"}).to_dict()["base_url"]
    assert recorded == ["http://***@host:9/v1"]
    # APIBANK_BASE_URL comes before the OpenAI client's own variable.
    assert resolve(env={"OPENAI_BASE_URL": "http://o/v1", "APIBANK_BASE_URL": "http://a/v1"}).base_url == ["http://a/v1"]


def test_deprecated_names_still_work_with_a_warning():
    with pytest.warns(DeprecationWarning, match="APIBANK_BASE_URLS is deprecated.*APIBANK_BASE_URL"):
        assert resolve(env={"APIBANK_BASE_URLS": "http://a/v1,http://b/v1"}).base_url == ["http://a/v1", "http://b/v1"]
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
    with pytest.raises(ValueError, match="--apibank-model"):
        model_config(resolve(options={"base_url": "http://a/v1"}))


def _table_in_readme() -> str:
    text = README.read_text(encoding="utf-8")
    start, end = (re.escape(marker) for marker in settings.README_BLOCK)
    match = re.search(f"{start}(.*?){end}", text, re.S)
    assert match, "README.md has no generated settings table"
    return match.group(1)


def test_readme_table_is_the_settings_table():
    assert _table_in_readme() == settings.markdown_table(), \
        "regenerate it: python -m apibank_bench.core.settings --write-readme"


def test_every_setting_is_a_pytest_option_an_ini_key_and_a_run_flag(pytestconfig):
    for setting in settings.SETTINGS:
        assert pytestconfig.getoption(setting.dest, "missing") != "missing", setting.option
        assert pytestconfig.getini(setting.dest) is None  # declared, unset
    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    run = sub.choices["run"]
    flags = {action.dest for action in run._actions}
    assert {setting.name for setting in settings.SETTINGS} <= flags


def test_run_flags_become_pytest_options():
    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    args = sub.choices["run"].parse_args(["--topology", "decentralized", "--team-size", "8", "--rounds", "1",
                                          "--limit", "5", "--model", "m", "--base-url", "http://a/v1", "http://b/v1",
                                          "--no-constrained", "--temperature", "0", "--batch", "-n", "2"])
    joined = " ".join(pytest_args(args))
    for fragment in ["--apibank-topology decentralized", "--apibank-team-size 8", "--apibank-rounds 1",
                     "--apibank-limit 5", "--apibank-model m", "--apibank-base-url http://a/v1 http://b/v1",
                     "--apibank-no-constrained", "--apibank-temperature 0", "-n 2"]:
        assert fragment in joined
    args = sub.choices["run"].parse_args([])
    assert "--apibank-limit 2" in " ".join(pytest_args(args))  # `run` runs 2 instances by default
    args = sub.choices["run"].parse_args(["--limit", "0"])
    assert "--apibank-limit" not in " ".join(pytest_args(args))  # 0 = all
