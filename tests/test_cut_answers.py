"""Answers that keep stopping at max_tokens: the warning names the fix that applies (runs/cut_answers.py)."""

from __future__ import annotations

import warnings

import pytest

from apibank_bench.core import settings
from apibank_bench.runs.cut_answers import cut_fix

LLAMA_CPP_PYTHON = {"object": "list", "data": [{"id": "gemma", "object": "model", "owned_by": "me"}]}
LLAMA_SERVER = {"object": "list", "data": [{"id": "gemma", "object": "model", "owned_by": "llamacpp"}]}
HOSTED = {"object": "list", "data": [{"id": "gpt", "object": "model", "owned_by": "openai"}]}
RAMBLING = ["[GetToday()] and then I kept talking about the weather"]
NEXT_TURNS = ["Sure.<end_of_turn>\n<start_of_turn>user\nAnd now?"]


def cfg(**options):
    options = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **options}
    return settings.resolve(lambda s: options.get(s.name), lambda s: None, environ={})


def test_llama_cpp_python_taken_for_a_hosted_api_is_told_to_add_the_server_kind():
    """The issue's case: `--chat_format gemma` given, no grammar sent: the fix is the grammar, not the format."""
    fix, what = cut_fix(cfg(), LLAMA_CPP_PYTHON, RAMBLING)
    assert fix == "grammar"
    assert "--apibank-server-kind llama.cpp --apibank-constrained" in what and "llama-cpp-python's server" in what
    assert "chat_format" not in what


def test_a_server_that_takes_a_grammar_is_told_to_add_constrained():
    """A remote run sends no grammar unless asked (the reference's protocol)."""
    fix, what = cut_fix(cfg(), LLAMA_SERVER, RAMBLING)
    assert fix == "grammar" and "add --apibank-constrained" in what


def test_a_grammar_turned_off_by_hand_is_told_to_drop_no_constrained():
    fix, what = cut_fix(cfg(constrained="0", server_kind="vllm"), None, RAMBLING)
    assert fix == "grammar" and "drop --apibank-no-constrained" in what


@pytest.mark.parametrize("kind", ["llama.cpp", "vllm"])
def test_answers_cut_inside_a_call_under_the_grammar_need_more_max_tokens(kind):
    fix, what = cut_fix(cfg(server_kind=kind, max_tokens="64", constrained="1"), None, RAMBLING)
    assert fix == "max_tokens" and "--apibank-max-tokens" in what and "64" in what
    assert "grammar was sent" in what


def test_the_embedded_model_sends_its_grammar_so_its_fix_is_max_tokens():
    fix, _ = cut_fix(cfg(base_url=None, model=None), None, RAMBLING)
    assert fix == "max_tokens"


def test_answers_that_write_the_next_turns_need_the_model_s_chat_format():
    fix, what = cut_fix(cfg(server_kind="llama.cpp", constrained="1"), LLAMA_SERVER, NEXT_TURNS)
    assert fix == "chat format" and "--chat_format" in what and "<start_of_turn>" in what


@pytest.mark.parametrize("options, models", [({}, HOSTED), ({"server_kind": "sglang"}, None)],
                         ids=["openai", "sglang"])
def test_a_server_that_takes_no_grammar_and_writes_long_answers_needs_more_max_tokens(options, models):
    """No grammar is possible there, and nothing shows a wrong template."""
    fix, what = cut_fix(cfg(**options), models, RAMBLING)
    assert fix == "max_tokens" and "--apibank-max-tokens" in what


def test_constrained_to_a_server_kind_without_a_grammar_field_warns_naming_the_server_kind():
    """`--constrained` alone against llama-cpp-python (taken for a hosted API) sends no grammar: said at once."""
    from apibank_bench.agents.models import single_client
    from apibank_bench.llm.probe import forget_probes
    from openai_stub import OpenAIStub

    forget_probes()
    with OpenAIStub(owned_by="me") as stub:
        with pytest.warns(RuntimeWarning, match="sends no grammar.*--apibank-server-kind llama.cpp"):
            client = single_client(cfg(base_url=stub.url, constrained="1"), None)
        assert client.config.use_grammar is False
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert single_client(cfg(base_url=stub.url, constrained="1", server_kind="llama.cpp"),
                                 None).config.use_grammar
    forget_probes()
