"""Chat against function calling: each `chat` run paired with the `sdk` runs of the same setup.

BFCL reports every model twice, "(Prompt)" and "(FC)". Among the runs given to `compare` or the
report, two runs are the two modes of one setup when every measured setting they recorded agrees
(model, topology, team, sampling ...) but the agent kind and what only function-calling agents
measure (`--tool-parse`, `--history`; an alias topology counts as its target with its agent kind). Each
such pair gets the paired statistics of `compare` (the sdk run against the chat run: the accuracy
difference with its bootstrap interval and the exact McNemar test) and the `answered_by` mix of
each run (scoring.answered_by.AnsweredBy): an sdk run whose answers came through text is not a
function-calling result, whatever its kind.
"""

from __future__ import annotations

import json
from collections import Counter

from apibank_bench.scoring.answered_by import AnsweredBy
from apibank_bench.core import settings
from apibank_bench.reports.pairs import Run, compare_pair, format_p, pair
from apibank_bench.runs.pairing import first_epoch

#: What differs between the two modes of one setup.
MODE_SETTINGS = ("agent_kind", "tool_parse", "history")
_MEASURED = tuple(setting.name for setting in settings.RUN_SETTINGS
                  if setting.role == settings.MEASUREMENT and setting.name not in MODE_SETTINGS)


def _as_run(run: Run) -> dict:
    """The run's recorded settings as it ran: an alias topology as its target, with its agent kind (recorded as
    `ran`; a folder written before it was, resolved by the topologies' specs)."""
    recorded = dict(run.config.get("run") or {})
    ran = run.config.get("ran")
    if isinstance(ran, dict):
        return {**recorded, **ran}
    if not recorded.get("topology"):  # saved answers scored (`score`): no agents ran
        return recorded
    from apibank_bench.agents.topologies import spec_of

    try:
        alias = spec_of(str(recorded.get("topology"))).alias_of
    except (KeyError, ValueError, LookupError):  # a topology this version does not know: as recorded
        return recorded
    if alias is not None:
        recorded.update(topology=alias.topology, agent_kind=alias.agent_kind)
    return recorded


def mode_of(run: Run) -> str:
    return "sdk" if _as_run(run).get("agent_kind") == "sdk" else "chat"


def _setup(run: Run) -> str:
    """The run's measured settings but the mode's, as one comparable text."""
    recorded = _as_run(run)
    return json.dumps({name: recorded.get(name) for name in _MEASURED}, sort_keys=True, default=str)


def answered_mix(run: Run) -> dict[str, int]:
    """How many of the run's answers (epoch 0's, as paired) came through each path; empty when none says."""
    counts = Counter(str(row.answered_by) for row in first_epoch(run.rows).values() if row.answered_by is not None)
    if not counts:
        return {}
    return {**{str(path): counts.pop(str(path), 0) for path in AnsweredBy}, **dict(sorted(counts.items()))}


def _tool_parse(run: Run) -> str:
    return str((run.config.get("run") or {}).get("tool_parse") or "both")


def mode_pairs(runs: list[Run]) -> list[tuple[Run, Run]]:
    """(chat run, sdk run) for every two runs that are the two modes of one setup, in the order given. A chat
    agent reads no `--tool-parse`, so a sweep's chat cells of several values are the same run: an sdk run is
    paired with the chat run of its own value where there is one (a row per sdk cell, not per chat duplicate),
    else with every chat run of its setup."""
    chats = [run for run in runs if mode_of(run) == "chat"]
    found = []
    for sdk in (run for run in runs if mode_of(run) == "sdk"):
        same = [chat for chat in chats if _setup(chat) == _setup(sdk)]
        own = [chat for chat in same if _tool_parse(chat) == _tool_parse(sdk)]
        found += [(chat, sdk) for chat in own or same]
    return found


def mode_comparisons(runs: list[Run], seed: int = 0) -> list[dict]:
    """Each chat/sdk pair's paired statistics (the sdk run against the chat run) and both answer mixes.
    A pair whose data, manifest or ToolSearcher scorer differ is left out (`pair` refuses it)."""
    found = []
    for chat, sdk in mode_pairs(runs):
        pairing = pair(chat, sdk)
        if pairing.refused or not pairing.paired:
            continue
        recorded = sdk.config.get("run") or {}
        stats = compare_pair(chat, sdk, seed, pairing)
        found.append({
            "model": recorded.get("model") or "embedded", "topology": _as_run(chat).get("topology"),
            "chat": chat.name, "sdk": sdk.name,
            "tool_parse": recorded.get("tool_parse", "both"), "history": recorded.get("history", "text"),
            "answered_by": {"chat": answered_mix(chat), "sdk": answered_mix(sdk)},
            **{key: stats[key] for key in ("paired", "overall", "by_level", "notes")},
        })
    return found


HEADER = ["model", "topology", "chat run", "sdk run", "paired n", "chat", "sdk", "sdk - chat",
          "95% CI (paired bootstrap)", "McNemar p (exact)", "chat answered by", "sdk answered by"]


def mix_text(mix: dict[str, int]) -> str:
    """`tool_call 40, client_parse 3, text 5` (paths with answers only); `-` when the run names none."""
    shown = ", ".join(f"{path} {count}" for path, count in mix.items() if count)
    return shown or "-"


def rows(comparisons: list[dict]) -> list[list]:
    """The model x mode table: one row per chat/sdk pair."""
    table = []
    for comp in comparisons:
        overall = comp["overall"]
        low, high = overall["ci_95"]
        table.append([comp["model"], comp["topology"], comp["chat"], comp["sdk"], overall["n"],
                      f"{overall['accuracy_baseline']:.1%}", f"{overall['accuracy_run']:.1%}",
                      f"{overall['difference']:+.1%}", f"[{low:+.3f}, {high:+.3f}]", format_p(overall["mcnemar_p"]),
                      mix_text(comp["answered_by"]["chat"]), mix_text(comp["answered_by"]["sdk"])])
    return table


def no_tool_calls(comp: dict) -> bool:
    """Whether the pair's sdk run names its paths and none of its answers came through a tool call: its number
    is a text result, whatever its agent kind."""
    mix = comp["answered_by"]["sdk"]
    return bool(mix) and not any(mix.get(str(path)) for path in (AnsweredBy.TOOL_CALL, AnsweredBy.CLIENT_PARSE))


NO_TOOL_CALLS = "no answer came through a tool call: this is not a function-calling result"


def mode_lines(comparisons: list[dict]) -> list[str]:
    """The table for the terminal (`compare`): one paragraph per pair."""
    lines = []
    for comp in comparisons:
        overall = comp["overall"]
        low, high = overall["ci_95"]
        lines += [f"chat vs sdk ({comp['model']}, {comp['topology']}; tool parse {comp['tool_parse']}, history "
                  f"{comp['history']}): {comp['chat']} {overall['accuracy_baseline']:.1%}, {comp['sdk']} "
                  f"{overall['accuracy_run']:.1%} on {overall['n']} paired instances",
                  f"  sdk - chat {overall['difference']:+.1%} [{low:+.3f}, {high:+.3f}], McNemar p = "
                  f"{format_p(overall['mcnemar_p'])}",
                  f"  answered by: chat {mix_text(comp['answered_by']['chat'])}; sdk "
                  f"{mix_text(comp['answered_by']['sdk'])}"]
        if no_tool_calls(comp):
            lines.append(f"  {comp['sdk']}: {NO_TOOL_CALLS}")
    return lines
