"""The environment a setting does not cover: variables for a library while it is imported, and secrets
handed to a cell job through the environment rather than its job file."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping

from apibank_bench.core.settings.table import SETTINGS

#: Variables the suite sets for a library it imports, only while importing it (and restores after).
#: litellm (imported by DSPy for MIPROv2) fetches a price list from GitHub at import unless told not to.
LIBRARY_ENVIRONMENT = {"litellm": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}}


@contextlib.contextmanager
def library_environment(library: str):
    """`LIBRARY_ENVIRONMENT[library]` in the environment for the duration (a value the user set wins)."""
    wanted = {name: value for name, value in LIBRARY_ENVIRONMENT[library].items() if name not in os.environ}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name in wanted:
            os.environ.pop(name, None)



@contextlib.contextmanager
def secrets_in_environment(given: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The values without secrets, which meanwhile are in this process's environment: a cell job
    inherits them (locally, or through the environment sbatch exports) and no job file holds them."""
    secret = {s.name: s.env_names[0] for s in SETTINGS if s.secret and given.get(s.name) is not None}
    saved = {variable: os.environ.get(variable) for variable in secret.values()}
    os.environ.update({variable: str(given[name]) for name, variable in secret.items()})
    try:
        yield {name: value for name, value in given.items() if name not in secret}
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
