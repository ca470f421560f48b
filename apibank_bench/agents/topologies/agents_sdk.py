"""`agents_sdk`: kept so existing commands work; the `single` topology with `sdk` agents."""

from apibank_bench.agents.topologies import TOPOLOGIES

TOPOLOGIES.register("agents_sdk", "an alias: `single` with `--apibank-agent-kind sdk`", roles=lambda cfg: ["solver"],
                    reads=(), alias_of={"topology": "single", "agent_kind": "sdk"})(None)
