"""Where a run's results go when the user names no folder: a folder per model and per the settings
most often varied, so that two runs a user is likely to make one after the other do not meet in one
folder (one run per results folder)."""

from __future__ import annotations

import os
import re

from apibank_bench.core.settings import RunConfig


def results_dir(cfg: RunConfig) -> str:
    """`out_dir`, else
    `results/apibank/<model>/<topology>[_<kind>][_<protocol>][_parse-<tool parse>][_history-<history>][-n<team size>]...`
    (`...`: `[-r<rounds>][-<format>][-seed<seed>]`; the tool parse and history of sdk agents, when not the default)
    (`results/apibank/gold` for the self-check; a mixed team's <model> is `mixed-<the final role's model>`)."""
    if cfg.out_dir:
        return cfg.out_dir
    if cfg.is_gold:
        return os.path.join("results", "apibank", "gold")
    from apibank_bench.agents.topologies import as_run, spec_of

    spec = spec_of(cfg.topology)
    plain = cfg.agent_kind == "chat" or spec.alias_of is not None  # an alias's name says its kind
    name = cfg.topology if plain else f"{cfg.topology}_{cfg.agent_kind}"
    if cfg.team_protocol != "topology":
        name += f"_{cfg.team_protocol}"
    if as_run(cfg)[1].agent_kind == "sdk":  # what only function-calling agents measure (an alias's too)
        name += "" if cfg.tool_parse == "both" else f"_parse-{cfg.tool_parse}"
        name += "" if cfg.history == "text" else f"_history-{cfg.history}"
    if spec.is_team:
        name += f"-n{cfg.team_size}" + (f"-r{cfg.rounds}" if "rounds" in spec.reads else "")
        name += "" if cfg.message_format == "freeform" else f"-{cfg.message_format}"
    name += f"-seed{cfg.seed}" if cfg.seed else ""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", answering(cfg)).strip("._") or "model"
    return os.path.join("results", "apibank", model, name)


def answering(cfg: RunConfig) -> str:
    """Who answers, in a folder's name: `--model` (`embedded` for the default embedded model); with `--model-role`,
    the final role's model, `mixed-` before it when the team's roles have more than one model."""
    if not cfg.model_role:
        return cfg.model or "embedded"
    from apibank_bench.agents.model_roles import answering_model

    _, (model, _), mixed = answering_model(cfg)
    return f"mixed-{model or 'embedded'}" if mixed else model or "embedded"
