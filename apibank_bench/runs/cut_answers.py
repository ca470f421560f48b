"""Answers that keep stopping at max_tokens: which fix applies, from what the run sent and what came back.

- **the grammar**: none was sent. With one, every answer is one call and ends there; the server kind
  says whether one could be (`--constrained` not given, or a local server taken for a hosted API);
- **the chat format**: the answers go on to write the conversation's next turns (a template's role
  markers in them): the server formats the prompt in a template that is not the model's;
- **max_tokens**: neither: the answers are long as asked (cut inside a call under the grammar, or a
  model that writes at length), so only a larger `--max-tokens` lets them finish.
"""

from __future__ import annotations

from typing import Any, Iterable

from apibank_bench.core.settings import flag
from apibank_bench.llm.config import SERVER_KINDS

#: What a model writes when it goes on past its own turn: chat templates' turn markers (Gemma, ChatML,
#: Llama 2 and 3, Phi, Zephyr) and role lines.
TURN_MARKERS = ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "[INST]", "[/INST]", "<<SYS>>",
                "<|start_header_id|>", "<|eot_id|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>",
                "\nuser\n", "\nmodel\n", "\nUser:", "\nAssistant:", "\n### User", "\n### Assistant")

#: `owned_by` of OpenAI's own models: a hosted API, which takes no grammar.
HOSTED_OWNERS = {"openai", "system", "openai-internal"}


def turn_marker(texts: Iterable[str]) -> str | None:
    """The first turn marker found in the answers, if any (the model wrote the next turns itself)."""
    for text in texts:
        for marker in TURN_MARKERS:
            if marker in text:
                return marker
    return None


def cut_fix(cfg: Any, models: Any, cut_texts: Iterable[str]) -> tuple[str, str]:
    """(the fix: "grammar", "chat format" or "max_tokens", what to do) for answers that stopped at max_tokens.

    `cfg`: the run's settings (its `--model` at `--base-url`, or the embedded model); `models`: that endpoint's
    `/v1/models` answer (its server kind under `--server-kind auto`); `cut_texts`: some of the cut answers."""
    from apibank_bench.llm.config import server_kind

    local = not cfg.base_url
    kind, decided_by = server_kind(cfg, models, local)
    takes_grammar = SERVER_KINDS[kind].grammar
    asked = local if cfg.constrained is None else bool(cfg.constrained)  # as llm.config.model_config
    sent_grammar = takes_grammar and asked
    if not sent_grammar and takes_grammar:
        add = f"drop {flag('no_constrained')}" if cfg.constrained is False else f"add {flag('constrained')}"
        return "grammar", (f"no grammar was sent, though this {kind} server takes one: {add}, and every answer is "
                           "one call")
    data = models.get("data") if isinstance(models, dict) else None
    owners = sorted({str(item.get("owned_by")) for item in data or () if isinstance(item, dict)})
    if not sent_grammar and kind in ("openai", "none") and not set(owners) & HOSTED_OWNERS:  # a local server, perhaps
        whose = " (llama-cpp-python's server)" if owners == ["me"] else ""
        return "grammar", (f"no grammar was sent: the server is taken for a hosted API ({decided_by}){whose}; if "
                           f"it takes llama.cpp's GBNF grammar (llama-cpp-python, llama.cpp's llama-server), add "
                           f"{flag('server_kind')} llama.cpp {flag('constrained')} (vLLM: {flag('server_kind')} "
                           f"vllm {flag('constrained')}), and every answer is one call")
    marker = turn_marker(cut_texts)
    if marker is not None:
        return "chat format", (f"the answers go on to write the next turns ({marker!r}): the server's chat template "
                               "is not the model's; start it with the model's own (llama-cpp-python: --chat_format "
                               "NAME; llama.cpp's llama-server: --jinja)")
    inside = "cut inside a call (the grammar was sent)" if sent_grammar else "long as the model writes them"
    return "max_tokens", (f"the answers are {inside}: raise {flag('max_tokens')} "
                          f"(now {cfg.max_tokens}) to let them finish")
