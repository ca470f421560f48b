"""What core's settings table leaves to the layers that own the names: the choices of `--topology`,
`--agent-kind` and `--toolsearcher-scorer` (read from their registries when first needed, so a new
topology module is all it takes to add a choice), the topologies' team-size rule, the agent kinds'
`--history` rule, and the check of the models a run names (`agents.models.check_models`: an endpoint has a
model name and a model name an endpoint, every `--model-role` a role of the topology, every embedded model's
file usable), each run once, where the settings resolve.

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
from apibank_bench.core.settings import (RunConfig, hand_down_choices, hand_down_completion, hand_down_rule,
                                         markdown_table, write_readme_table)


def _topologies() -> list[str]:
    from apibank_bench.agents.topologies import TOPOLOGIES

    return TOPOLOGIES.names()


def _agent_kinds() -> list[str]:
    from apibank_bench.agents.kinds import AGENT_KINDS

    return AGENT_KINDS.names()


def _toolsearcher_scorers() -> list[str]:
    from apibank_bench.scoring.toolsearcher_scorers import SCORERS

    return SCORERS.names()


def _checks(cfg: RunConfig) -> None:
    """The topologies' team-size and `--history` rules, and the models the run names (not the default embedded
    model's install, which the run checks as it starts: commands that run no model resolve settings too, and
    import no model layer)."""
    from apibank_bench.agents.topologies import check_history, check_team_size

    check_team_size(cfg)
    check_history(cfg)
    if not cfg.default_model:
        from apibank_bench.agents.models import check_models

        check_models(cfg)


def _resumed(cfg: RunConfig, given) -> RunConfig:
    from apibank_bench.runs.folder import resumed_settings

    return resumed_settings(cfg, given)


def hand_down() -> None:
    """Give core's settings these choices, rules and the resume's completion (again: no change)."""
    hand_down_choices("topology", _topologies)
    hand_down_choices("agent_kind", _agent_kinds)
    hand_down_choices("toolsearcher_scorer", _toolsearcher_scorers)
    hand_down_rule(_checks)
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
