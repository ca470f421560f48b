"""The model layer: settings, the chat client, call grammars and the embedded local model."""

from .client import ChatClient, Completion, ModelError, UsageStats
from .config import ModelConfig
from .grammar import call_extra_body, call_grammar, grammar_extra_body
from .retry import RetryPolicy, is_retryable

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
    "is_retryable",
]
