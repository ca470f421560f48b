"""The model layer: settings, the chat client, call grammars and the embedded local model."""

from apibank_bench.llm.client import ChatClient, Completion, ModelError, UsageStats
from apibank_bench.llm.config import ModelConfig
from apibank_bench.llm.embedded_models import is_embedded_model
from apibank_bench.llm.grammar import call_extra_body, call_grammar, grammar_extra_body
from apibank_bench.llm.retry import RetryPolicy, is_retryable

__all__ = [
    "ChatClient",
    "Completion",
    "ModelConfig",
    "ModelError",
    "RetryPolicy",
    "UsageStats",
    "call_extra_body",
    "call_grammar",
    "grammar_extra_body",
    "is_embedded_model",
    "is_retryable",
]
