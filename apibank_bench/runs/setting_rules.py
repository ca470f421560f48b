"""What core's settings table leaves to the layers that own the names: the choices of `--topology`,
`--agent-kind` and `--toolsearcher-scorer` (read from their registries when first needed, so a new
topology module is all it takes to add a choice), the topologies' team-size rule, the agent kinds'
`--history` rule, and the rule that a run names the model that answers
(`agents.models.check_model_and_endpoint`).

Each composition root calls `hand_down()` once, explicitly (the CLI's `main`, the plugin's configure, a
sweep cell's job, the test suite's conftest, a script), so every run's settings are resolved with them;
importing this module does nothing. Nothing here imports a registry until a choice is asked for:
`--help` loads no topology.

The docs' settings table is generated here, where every choice is known:
`python -m apibank_bench.runs.setting_rules` prints it; `--write FILE` puts it between the markers of a
markdown file (`--write-docs`: the docs site's settings page, docs/settings.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.core.settings import (RunConfig, hand_down_choices, hand_down_completion, hand_down_rule, markdown_table,
                                         write_readme_table)


def _topologies() -> list[str]:
    from apibank_bench.agents.topologies import TOPOLOGIES

    return TOPOLOGIES.names()


def _agent_kinds() -> list[str]:
    from apibank_bench.agents.kinds import AGENT_KINDS

    return AGENT_KINDS.names()


def _toolsearcher_scorers() -> list[str]:
    from apibank_bench.scoring.toolsearcher_scorers import SCORERS

    return SCORERS.names()


def _team_size(cfg: RunConfig) -> None:
    from apibank_bench.agents.topologies import check_team_size

    check_team_size(cfg)


def _history(cfg: RunConfig) -> None:
    from apibank_bench.agents.topologies import check_history

    check_history(cfg)


def _model_and_endpoint(cfg: RunConfig) -> None:
    if cfg.model or cfg.base_url:  # the embedded default needs no check (and no import of the model layer)
        from apibank_bench.agents.models import check_model_and_endpoint

        check_model_and_endpoint(cfg)


def _resumed(cfg: RunConfig, given) -> RunConfig:
    if not (cfg.resume and cfg.out_dir):
        return cfg
    from apibank_bench.runs.folder import resumed_settings

    return resumed_settings(cfg, given)


def hand_down() -> None:
    """Give core's settings these choices, rules and the resume's completion (again: no change)."""
    hand_down_choices("topology", _topologies)
    hand_down_choices("agent_kind", _agent_kinds)
    hand_down_choices("toolsearcher_scorer", _toolsearcher_scorers)
    hand_down_rule(_team_size)
    hand_down_rule(_history)
    hand_down_rule(_model_and_endpoint)
    hand_down_completion(_resumed)


def main(argv: list[str]) -> None:
    hand_down()
    if "--write" in argv:
        write_readme_table(Path(argv[argv.index("--write") + 1]))
    elif "--write-docs" in argv:
        write_readme_table(PROJECT_ROOT / "docs" / "settings.md")
    else:
        print(markdown_table())


if __name__ == "__main__":
    main(sys.argv[1:])
