"""Agent kinds: what answers at each node of a topology. Every topology accepts every kind."""

from __future__ import annotations

from ..config import RunConfig
from ..llm import ChatClient
from .pieces import Agents
from .sdk_runner import SdkAgents

#: `chat`: one chat completion answering with the bracketed call;
#: `sdk`: an OpenAI Agents SDK agent with the visible APIs as function tools.
AGENT_KINDS: dict[str, type[Agents]] = {"chat": Agents, "sdk": SdkAgents}


def make_agents(cfg: RunConfig, model: ChatClient) -> Agents:
    try:
        kind = AGENT_KINDS[cfg.agent_kind]
    except KeyError:
        raise ValueError(f"unknown agent kind {cfg.agent_kind!r}; expected one of {', '.join(AGENT_KINDS)}") from None
    return kind(model, cfg.topology, cfg.prompts_dir, cfg.message_format)
