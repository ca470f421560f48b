"""Which role prompts a topology has at its team size: what a candidate is made of."""

from __future__ import annotations

from ..agents.prompts import role_text
from ..agents.topologies import PIPELINE, WORKER_ROLES
from ..config import RunConfig


def roles(cfg: RunConfig) -> list[str]:
    """The optimizable roles of the run's topology, in the topology's order."""
    if cfg.topology in ("single", "independent"):
        return ["solver"]
    if cfg.topology == "decentralized":
        return ["debater"]
    if cfg.topology == "centralized":
        return ["manager", *WORKER_ROLES[: max(cfg.team_size - 1, 1)]]
    if cfg.topology == "sequential":
        return [role for role, joins_at in PIPELINE if joins_at <= cfg.team_size]
    raise ValueError(f"topology {cfg.topology!r} has no optimizable role prompts")


def seed_prompts(cfg: RunConfig) -> dict[str, str]:
    """Each role's starting text (the run's --prompts-dir if it has one, else the packaged file)."""
    return {role: role_text(cfg.topology, role, cfg.prompts_dir) for role in roles(cfg)}
