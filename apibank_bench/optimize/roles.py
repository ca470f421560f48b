"""Which role prompts a topology has at its team size: what a candidate is made of."""

from __future__ import annotations

from apibank_bench.agents.prompts import role_text
from apibank_bench.agents.topologies import TOPOLOGIES, roles
from apibank_bench.core.settings import RunConfig

#: Topologies whose role prompts a candidate holds (an alias such as `agents_sdk` has its own target's).
OPTIMIZABLE = tuple(entry.name for entry in TOPOLOGIES if not entry.extra.get("alias_of"))


def seed_prompts(cfg: RunConfig) -> dict[str, str]:
    """Each role's starting text (the run's --prompts-dir if it has one, else the packaged file)."""
    return {role: role_text(cfg.topology, role, cfg.prompts_dir) for role in roles(cfg)}
