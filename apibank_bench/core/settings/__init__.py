"""Every setting of every command, declared once.

The table (`table.SETTINGS`) is a benchmark run's settings, which are `RunConfig`'s typed fields
(`run_config.py`), then the settings of one command. From it come the flags of every
`apibank-bench` command (`--NAME`, one spelling everywhere), for the settings of a benchmark run also
the pytest options (`--apibank-NAME`) and ini keys (`apibank_NAME`), the environment variables
(`APIBANK_NAME`, and the OpenAI client's own `OPENAI_BASE_URL` / `OPENAI_API_KEY` where noted), the
docs' settings table and the `config.run` part of `summary.json` (`generate.py`).
Precedence: command line, then ini, then environment, then default (`resolve.py`).

This package is the only reader of the environment: lower layers receive values.
Each setting's `role` says what it is to a measurement: part of what is measured, how
the run is carried out (`operational`), or which instances it covers (`selection`);
sweep, resume and compare all ask that field.

Choices that name a registered thing (topologies, ToolSearcher scorers, agent kinds) and the
team-size rule are handed down by the layers that own them (`runs.setting_rules.hand_down()`, one
explicit call by each composition root: the CLI, the pytest plugin's configure): core names no higher layer.

The modules: `parsers` (values), `setting` (one row), `run_config` (RunConfig), `table` (SETTINGS),
`voice` (the typed command's words), `resolve`, `generate`, `environment`. Their names are all here.
"""

from apibank_bench.core.settings.environment import LIBRARY_ENVIRONMENT, library_environment, secrets_in_environment
from apibank_bench.core.settings.generate import (
    FROM_TABLE, README_BLOCK, add_command_flags, add_pytest_options, markdown_table, pytest_argv, write_readme_table,
)
from apibank_bench.core.settings.parsers import (
    NO_ROLE_MODELS, above, at_least, model_role_parts, parse_alpha, parse_bool, parse_json_object, parse_list,
    parse_model_roles, parse_prices, parse_shard, parse_urls,
)
from apibank_bench.core.settings.resolve import (
    checked, command_values, from_environment, given_names, hand_down_completion, hand_down_rule, of_command, resolve,
    resolve_sweep, run_config_of, value_from_environment, value_of,
)
from apibank_bench.core.settings.run_config import RUN_SETTINGS, SERVER_KINDS, RunConfig, from_record
from apibank_bench.core.settings.setting import (
    DATA_COMMANDS, HANDED_DOWN, MEASUREMENT, OPERATIONAL, ROLES, RUN_COMMANDS, SELECTION, TEAM_COMMANDS, Setting,
    hand_down_choices,
)
from apibank_bench.core.settings.table import (
    BY_NAME, COMMAND_SETTINGS, EXECUTORS, METHODS, RUN_DEFAULT_LIMIT, SETTINGS, SWEEP_SETTINGS, differences,
    names_with_role, run_limit,
)
from apibank_bench.core.settings.voice import Voice, command_voice, flag, spoken, use_voice, voice

__all__ = [
    "BY_NAME", "COMMAND_SETTINGS", "DATA_COMMANDS", "EXECUTORS", "FROM_TABLE", "HANDED_DOWN",
    "LIBRARY_ENVIRONMENT", "MEASUREMENT", "METHODS", "NO_ROLE_MODELS", "OPERATIONAL", "README_BLOCK", "ROLES",
    "RUN_COMMANDS", "RUN_DEFAULT_LIMIT", "RUN_SETTINGS", "SELECTION", "SERVER_KINDS", "SETTINGS", "SWEEP_SETTINGS",
    "TEAM_COMMANDS", "RunConfig", "Setting", "Voice", "above", "add_command_flags", "add_pytest_options", "at_least",
    "checked", "command_values", "command_voice", "differences", "flag", "from_environment", "from_record", "given_names",
    "hand_down_choices", "hand_down_completion", "hand_down_rule", "library_environment", "markdown_table", "model_role_parts",
    "names_with_role", "of_command", "parse_alpha", "parse_bool", "parse_json_object", "parse_list",
    "parse_model_roles", "parse_prices", "parse_shard", "parse_urls", "pytest_argv", "resolve", "resolve_sweep",
    "run_config_of", "run_limit", "secrets_in_environment", "spoken", "use_voice", "value_from_environment",
    "value_of", "voice", "write_readme_table",
]
