"""What an optimizer reads of a rollout (one instance run by the team with one candidate): each role's
input and output, its readers' outputs, the scorer's verdict; and small text helpers shared by the methods."""

from __future__ import annotations

import hashlib
import re

from apibank_bench.core.text import shortened

_CLIP = 1500  # characters of one text shown to the optimizer model; keeps prompts small-model sized
_TAG = re.compile(r"<prompt>(.*?)</prompt>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def clip(text: str | None, limit: int = _CLIP) -> str:
    """A text as the optimizer model is shown it: trimmed, its start up to `limit` characters."""
    return shortened((text or "").strip(), limit, mark=" [...]")


def extract_prompt(reply: str) -> str:
    """The proposed prompt in a reply: inside <prompt> tags, else a fenced block, else the whole reply."""
    for pattern in (_TAG, _FENCE):
        found = pattern.search(reply)
        if found and found.group(1).strip():
            return found.group(1).strip()
    return reply.strip()


def role_turns(rollout, role: str) -> list[dict]:
    """The role's agent turns in the rollout's trace, in the order they ran."""
    return [turn for turn in rollout.agents if turn.get("role") == role]


def role_output(rollout, role: str) -> str:
    return "\n---\n".join(str(turn.get("answer") or "") for turn in role_turns(rollout, role))


def reader_output(rollout, role: str) -> str:
    """What the agents that read this role's first turn said: the next round's turns of other roles."""
    rounds = [turn.get("round", 0) for turn in role_turns(rollout, role)]
    if not rounds:
        return ""
    readers = [t for t in rollout.agents if t.get("round", 0) == min(rounds) + 1 and t.get("role") != role]
    return "\n---\n".join(f"{t.get('role')}: {t.get('answer') or ''}" for t in readers)


def turn_input(turn: dict, fallback: str = "") -> str:
    """The last user message of one agent turn (the system prompt is the candidate itself)."""
    users = [m.get("content", "") for m in turn.get("messages") or [] if m.get("role") == "user"]
    return users[-1] if users else fallback


def role_input(rollout, role: str) -> str:
    """What the role's first turn was shown; the dialogue where the role did not speak."""
    turns = role_turns(rollout, role)
    return turn_input(turns[0]) if turns else rollout.dialogue


def verdict(rollout) -> str:
    return (f"scorer: {'correct' if rollout.correct else 'incorrect'} (stage {rollout.stage}); "
            f"predicted {rollout.predicted_call}; gold {rollout.gold_call}"
            + (f"; error {rollout.error}" if rollout.error else ""))
