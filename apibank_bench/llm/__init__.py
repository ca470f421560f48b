"""The model layer: settings, the chat client, call grammars and the embedded local model."""

from .client import ChatClient, Completion, InFlightLimiter, ModelError, UsageStats
from .config import ModelConfig
from .grammar import call_extra_body, call_grammar, grammar_extra_body

__all__ = [
    "ChatClient",
    "Completion",
    "InFlightLimiter",
    "ModelConfig",
    "ModelError",
    "UsageStats",
    "call_extra_body",
    "call_grammar",
    "grammar_extra_body",
]
