"""Which role prompts a topology has at its team size: what a candidate is made of."""

from __future__ import annotations

from apibank_bench.agents.prompts import role_text
from apibank_bench.agents.topologies import own_topologies, roles
from apibank_bench.core.settings import RunConfig

#: Topologies whose role prompts a candidate holds (an alias such as `agents_sdk` has its own target's).
OPTIMIZABLE = own_topologies()


def seed_prompts(cfg: RunConfig) -> dict[str, str]:
    """Each role's starting text (the run's --prompts-dir if it has one, else the packaged file)."""
    return {role: role_text(cfg.topology, role, cfg.prompts_dir) for role in roles(cfg)}
