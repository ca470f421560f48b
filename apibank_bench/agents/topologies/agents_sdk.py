"""`agents_sdk`: kept so existing commands work; the `single` topology with `sdk` agents."""

from apibank_bench.agents.topologies import Alias, alias

alias("agents_sdk", "an alias: `single` with `--apibank-agent-kind sdk`", Alias(topology="single", agent_kind="sdk"))
