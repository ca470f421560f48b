"""apibank-bench: a pytest-native benchmark of LLM agents on API-Bank's next-API-call task."""

__version__ = "0.1.0"
