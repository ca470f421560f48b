"""One OpenAI Agents SDK agent with the task's visible APIs as function tools."""

from . import TOPOLOGIES


@TOPOLOGIES.register("agents_sdk", "one OpenAI Agents SDK agent with the visible APIs as function tools",
                     roles=lambda cfg: ["solver"])
def agents_sdk(agents, cfg):
    from ..sdk_agent import build_agents_sdk

    return build_agents_sdk(cfg, agents.model)
