"""One registration mechanism: the API sets and the optimizer methods are `core.registry.Registry`s like the
topologies, scorers, agent kinds and executors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from apibank_bench.apis import api_classes
from apibank_bench.apis.base import LEVEL3, LEVEL12, Api
from apibank_bench.core.registry import Registry
from apibank_bench.data import specs
from apibank_bench.optimize import methods


@pytest.mark.parametrize("registry", [LEVEL12, LEVEL3], ids=lambda registry: registry.name)
def test_an_api_set_is_a_registry_of_every_api_in_its_spec(registry):
    assert isinstance(registry, Registry)
    assert sorted(registry.names()) == sorted(specs.specs(registry.name))
    assert api_classes(registry.name) == {entry.name: entry.value for entry in registry}
    entry = registry.entry("ToolSearcher")
    assert issubclass(entry.value, Api) and entry.help == specs.spec(registry.name, "ToolSearcher")["description"]
    with pytest.raises(ValueError, match="unknown API 'NoSuchApi'"):
        registry.get("NoSuchApi")


def test_an_api_registered_twice_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        LEVEL12.register_api(api_classes(specs.LEVEL12)["AddAlarm"])


def test_the_methods_are_registry_names_that_load_their_module_when_used():
    assert methods.METHODS.names() == ["gepa", "mipro", "maspo"]
    assert methods.load("maspo").__name__ == "apibank_bench.optimize.maspo"
    with pytest.raises(ValueError, match="unknown method 'nope'; expected one of gepa, mipro, maspo"):
        methods.load("nope")


def test_listing_the_methods_imports_none_of_them():
    code = ("import sys\nfrom apibank_bench.optimize.methods import METHODS\nMETHODS.names()\n"
            "print(sorted(m for m in sys.modules if m.startswith('apibank_bench.optimize.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['apibank_bench.optimize.methods']"
