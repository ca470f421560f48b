"""Run settings: option over ini over environment, checked values."""

import pytest

from apibank_bench import config


def resolve(options=None, ini=None):
    options, ini = options or {}, ini or {}
    return config.resolve(lambda s: options.get(s.name), lambda s: ini.get(s.name))


def test_defaults(monkeypatch):
    for setting in config.SETTINGS:
        monkeypatch.delenv(config.env_name(setting), raising=False)
    cfg = resolve()
    assert (cfg.level, cfg.topology, cfg.team_size, cfg.rounds, cfg.message_format) == ("all", "single", 4, 2, "freeform")
    assert cfg.cache is True and cfg.constrained is None and cfg.limit is None
    assert cfg.results_dir.endswith("results/apibank/single")


def test_option_over_ini_over_environment(monkeypatch):
    monkeypatch.setenv("APIBANK_LIMIT", "7")
    monkeypatch.setenv("APIBANK_TOPOLOGY", "sequential")
    monkeypatch.setenv("APIBANK_CONSTRAINED", "false")
    cfg = resolve(ini={"topology": "centralized"})
    assert (cfg.limit, cfg.topology, cfg.constrained) == (7, "centralized", False)
    cfg = resolve(options={"topology": "independent", "limit": "3"}, ini={"topology": "centralized"})
    assert (cfg.limit, cfg.topology) == (3, "independent")


def test_lists_shards_and_gold(monkeypatch):
    monkeypatch.setenv("APIBANK_BASE_URL", "http://a/v1, http://b/v1")
    cfg = resolve(options={"shard": "2/3", "model": "gold", "only": ["x,y", "z"]})
    assert cfg.base_url == ["http://a/v1", "http://b/v1"]
    assert cfg.shard == (2, 3) and cfg.only == ["x", "y", "z"]
    assert cfg.is_gold and cfg.results_dir.endswith("results/apibank/gold")


@pytest.mark.parametrize("options", [{"shard": "3/2"}, {"topology": "ring"}, {"team_size": "3", "topology": "independent"},
                                     {"level": "4"}, {"cache": "maybe"}])
def test_bad_values_are_refused(options):
    with pytest.raises(ValueError):
        resolve(options=options)
