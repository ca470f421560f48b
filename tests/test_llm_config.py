"""ModelConfig.from_env: environment variables, then overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from apibank_bench.llm import ModelConfig


def test_defaults_without_environment(tmp_path):
    cfg = ModelConfig.from_env({"APIBANK_CACHE_DIR": str(tmp_path)})
    assert cfg.base_urls == [] and cfg.model == "" and cfg.api_key == ""
    assert (cfg.temperature, cfg.top_p, cfg.max_tokens, cfg.seed) == (0.2, 0.9, 1024, 0)
    assert (cfg.timeout, cfg.max_retries, cfg.max_in_flight) == (60.0, 5, 8)
    assert cfg.extra_body == {} and cfg.constrained is None and cfg.use_grammar
    assert cfg.cache_dir == tmp_path / "responses"
    assert ModelConfig().cache_dir is None  # the dataclass itself caches nothing


def test_default_cache_root_is_under_home():
    cfg = ModelConfig.from_env({})
    assert cfg.cache_dir == Path("~/.cache/apibank-bench/responses").expanduser()


def test_every_variable_is_read():
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:1/v1/, http://127.0.0.1:2/v1",
        "OPENAI_API_KEY": "k",
        "APIBANK_MODEL": "m",
        "APIBANK_TEMPERATURE": "0",
        "APIBANK_TOP_P": "1",
        "APIBANK_MAX_TOKENS": "64",
        "APIBANK_SEED": "3",
        "APIBANK_TIMEOUT": "2.5",
        "APIBANK_MAX_RETRIES": "0",
        "APIBANK_MAX_IN_FLIGHT": "1",
        "APIBANK_CACHE_DIR": "/tmp/x",
        "APIBANK_EXTRA_BODY": '{"grammar": "root ::= \\"a\\""}',
        "APIBANK_CONSTRAINED": "0",
        "APIBANK_SERVER_KIND": "vllm",
        "APIBANK_FOLD_SYSTEM": "1",
    }
    cfg = ModelConfig.from_env(env)
    assert cfg.base_urls == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert (cfg.api_key, cfg.model, cfg.temperature, cfg.top_p) == ("k", "m", 0.0, 1.0)
    assert (cfg.max_tokens, cfg.seed, cfg.timeout, cfg.max_retries, cfg.max_in_flight) == (64, 3, 2.5, 0, 1)
    assert cfg.cache_dir == Path("/tmp/x/responses")
    assert cfg.extra_body == {"grammar": 'root ::= "a"'}
    assert cfg.constrained is False and not cfg.use_grammar and cfg.server_kind == "vllm" and cfg.fold_system


def test_apibank_base_urls_wins_over_openai_base_url():
    cfg = ModelConfig.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "APIBANK_BASE_URLS": "http://127.0.0.1:2/v1"})
    assert cfg.base_urls == ["http://127.0.0.1:2/v1"]


def test_no_cache():
    assert ModelConfig.from_env({"APIBANK_NO_CACHE": "1", "APIBANK_CACHE_DIR": "/tmp/x"}).cache_dir is None
    assert ModelConfig.from_env({"APIBANK_CACHE_DIR": "/tmp/x"}, no_cache=True).cache_dir is None
    assert ModelConfig.from_env({"APIBANK_NO_CACHE": "0"}).cache_dir is not None


def test_overrides_win_and_none_means_not_given():
    env = {"APIBANK_MODEL": "env-model", "APIBANK_SEED": "3", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    cfg = ModelConfig.from_env(env, model="cli-model", seed=None, base_urls="http://127.0.0.1:5/v1,http://127.0.0.1:6/v1",
                               cache_dir="/tmp/y", constrained=True)
    assert cfg.model == "cli-model" and cfg.seed == 3
    assert cfg.base_urls == ["http://127.0.0.1:5/v1", "http://127.0.0.1:6/v1"]
    assert cfg.cache_dir == Path("/tmp/y") and cfg.constrained is True


@pytest.mark.parametrize("env", [
    {"APIBANK_SEED": "x"},
    {"APIBANK_EXTRA_BODY": "{"},
    {"APIBANK_EXTRA_BODY": "[1]"},
    {"APIBANK_CONSTRAINED": "maybe"},
    {"APIBANK_SERVER_KIND": "tgi"},
    {"APIBANK_MAX_IN_FLIGHT": "0"},
])
def test_bad_values_are_rejected(env):
    with pytest.raises(ValueError):
        ModelConfig.from_env(env)


def test_unknown_override_is_rejected():
    with pytest.raises(TypeError):
        ModelConfig.from_env({}, modle="typo")
