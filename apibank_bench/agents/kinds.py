"""Agent kinds: what answers at each node of a topology, registered in `AGENT_KINDS`.
Every topology accepts every kind."""

from __future__ import annotations

from apibank_bench.core.registry import Registry
from apibank_bench.agents.chat_agent import Agents

AGENT_KINDS: Registry = Registry("agent kind", "--apibank-agent-kind")
AGENT_KINDS.register("chat", "one chat completion that answers with the bracketed call")(Agents)


def _load() -> None:
    from apibank_bench.agents.sdk_agent import SdkAgents

    AGENT_KINDS.register("sdk", "an OpenAI Agents SDK agent with the visible APIs as function tools")(SdkAgents)


AGENT_KINDS.load_with(_load)


def make_agents(cfg, model, seeds_by_round: bool = False) -> Agents:
    return AGENT_KINDS.get(cfg.agent_kind)(model, cfg.topology, cfg.prompts_dir, cfg.message_format, cfg.team_size,
                                           tool_parse=cfg.tool_parse, history=cfg.history, seeds_by_round=seeds_by_round)


#: The agent kinds that are sent tools, and so can be sent the dialogue's API calls as tool calls.
FUNCTION_CALLING_KINDS = ("sdk",)
