"""What an agent is shown: role prompts (text files), the task prompt, and the visible API schemas.

Role prompts are data: `apibank_bench/prompts/<topology>/<role>.txt`, each with
`prompts/output_contract.txt` appended. A run may override any of them from a
folder of the same layout (`--apibank-prompts-dir`), which is how a prompt
optimizer rewrites them.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from apibank_bench.data import specs
from apibank_bench.data.tasks import Task

#: APIs never shown at Level 1 (the reference skips them; Level 1 tasks needing them are not curated).
_HIDDEN_AT_LEVEL1 = {"SearchEngine", "Translate", "ToolSearcher"}


@cache
def _packaged(relative: str) -> str:
    return resources.files("apibank_bench").joinpath("prompts", relative).read_text("utf-8").strip()


def role_text(topology: str, role: str, prompts_dir: str | None = None) -> str:
    """A role's own text (what an optimizer rewrites): the override file if there is one, else the packaged one.

    An override folder is laid out as ours (`<topology>/<role>.txt`) or as the reference's
    (`<topology>/apibank/<role>.txt`, a MAS-PromptBench checkout's `configs/prompts`).
    """
    for relative in (f"{topology}/{role}.txt", f"{topology}/apibank/{role}.txt"):
        override = Path(prompts_dir) / relative if prompts_dir else None
        if override is not None and override.is_file():
            return override.read_text(encoding="utf-8").strip()
    return _packaged(f"{topology}/{role}.txt")


def role_prompt(topology: str, role: str, prompts_dir: str | None = None) -> str:
    """The system prompt of one role: its text plus the output contract (never optimized)."""
    return role_text(topology, role, prompts_dir) + "\n\n" + _packaged("output_contract.txt")


def visible_api_names(task: Task) -> list[str]:
    """Level 1 shows the dialogue's APIs; Levels 2 and 3 show only ToolSearcher."""
    if task.level == "1":
        return [name for name in task.api_names if name not in _HIDDEN_AT_LEVEL1]
    return ["ToolSearcher"]


@cache
def _shown() -> dict[str, Any]:
    return json.loads(resources.files("apibank_bench").joinpath("data/shown_descriptions.json").read_text("utf-8"))


def shown_payload(task: Task, name: str) -> dict[str, Any]:
    """An API's description as the reference's prompts show it: upstream's class attributes
    (ToolManager.get_api_description), except where the reference shows its own text
    (ToolSearcher on Levels 2 and 3, `data/shown_descriptions.json`)."""
    shown = _shown()
    if task.level in shown["levels"]:
        for payload in shown["descriptions"]:
            if payload["name"] == name:
                return payload
    return specs.description_payload(specs.api_set_for_level(task.level), name)


def api_description(task: Task, name: str) -> str:
    """An API's description in the JSON form the prompt shows."""
    return json.dumps(shown_payload(task, name))


def _without_search_text(output: Any) -> Any:
    """ToolSearcher results as shown to agents: without the `desc_for_search` field."""
    if isinstance(output, list):
        return [_without_search_text(item) for item in output]
    if isinstance(output, dict):
        return {key: value for key, value in output.items() if key != "desc_for_search"}
    return output


def api_result(row: Any) -> dict[str, Any]:
    """An API row of the dialogue as the agents are shown it: name, input, output (ToolSearcher's without
    its search text) and exception."""
    result = row.get("result") or {}
    output = result.get("output")
    if row.get("api_name") == "ToolSearcher":
        output = _without_search_text(output)
    return {"api_name": row.get("api_name"), "input": result.get("input"), "output": output,
            "exception": result.get("exception")}


def format_history(task: Task) -> str:
    lines = []
    for row in task.history:
        if row["role"] == "User":
            lines.append(f"USER: {row.get('text', '')}")
        elif row["role"] == "AI":
            lines.append(f"ASSISTANT: {row.get('text', '')}")
        else:
            lines.append("API_RESULT: " + json.dumps(api_result(row), ensure_ascii=False, default=str))
    return "\n".join(lines)


_LEVEL_GUIDANCE = {
    "1": "",
    "2": ("The APIs you may call are found with ToolSearcher. If the history shows no ToolSearcher result for "
          "the API the user needs, call ToolSearcher with short keywords; otherwise call an API it returned."),
    "3": ("The user's requirement may take several API calls; predict only the next one. Find APIs with "
          "ToolSearcher when the history has not found the one needed yet; otherwise call an API it returned."),
}


#: Where the dialogue would be, when it is sent as messages instead (`--history tools`: agents.tool_history).
DIALOGUE_AS_MESSAGES = "DIALOGUE SO FAR: the messages that follow; its API calls are your earlier tool calls."


def _task_parts(task: Task, context: str, dialogue: bool) -> tuple[list[str], list[str]]:
    """The task prompt's parts before the dialogue's place (included) and after it."""
    head = [
        "Predict the next API call of this dialogue.",
        "AVAILABLE APIS:\n" + "\n".join(api_description(task, name) for name in visible_api_names(task)),
    ]
    if _LEVEL_GUIDANCE[task.level]:
        head.append(_LEVEL_GUIDANCE[task.level])
    head.append("DIALOGUE SO FAR:\n" + format_history(task) if dialogue else DIALOGUE_AS_MESSAGES)
    tail = ["FROM YOUR TEAM:\n" + context.strip()] if context else []
    tail.append("Answer with exactly one call: [ApiName(key='value', other=123)]")
    return head, tail


def task_prompt(task: Task, context: str = "") -> str:
    """The user message: descriptions, guidance, the dialogue so far, and any teammates' context."""
    head, tail = _task_parts(task, context, dialogue=True)
    return "\n\n".join([*head, *tail])


def task_prompt_around_dialogue(task: Task, context: str = "") -> tuple[str, str]:
    """The task prompt as two user messages to put around the dialogue sent as messages (`--history tools`):
    the descriptions and guidance before it, the teammates' context and the answer's form after it."""
    head, tail = _task_parts(task, context, dialogue=False)
    return "\n\n".join(head), "\n\n".join(tail)


def visible_schemas(task: Task) -> list[dict[str, Any]]:
    """The schemas an answer may use: the shown APIs plus every API a ToolSearcher result revealed."""
    api_set = specs.api_set_for_level(task.level)
    found: dict[str, dict[str, Any]] = {name: {**specs.spec(api_set, name), **shown_payload(task, name)}
                                        for name in visible_api_names(task)}
    for row in task.history:
        if row["role"] == "API" and row.get("api_name") == "ToolSearcher":
            output = (row.get("result") or {}).get("output")
            for item in output if isinstance(output, list) else [output]:
                if isinstance(item, dict) and item.get("name") and item["name"] not in found:
                    found[item["name"]] = {"name": item["name"],
                                           "input_parameters": item.get("input_parameters") or {}}
    return list(found.values())
