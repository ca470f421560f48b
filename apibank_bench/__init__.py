"""apibank-bench: a pytest-native benchmark of LLM agents on API-Bank's next-API-call task.

The public Python API (docs/api.md) is the names below; each is loaded on first use (module
`__getattr__`), so `import apibank_bench` imports nothing else. Names outside it may change
without notice.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (this import stays bare)

__version__ = "0.1.0"

#: The public API: every name is `apibank_bench.api`'s.
__all__ = ["Comparison", "PairedStats", "ResultRow", "Results", "RunConfig", "Summary", "UnsupportedSchemaVersion",
           "__version__", "compare", "read_results", "run", "run_config", "score_answers"]

if TYPE_CHECKING:
    from typing import Any

    from apibank_bench.api import (Comparison, PairedStats, ResultRow, Results, RunConfig, Summary,
                                   UnsupportedSchemaVersion, compare, read_results, run, run_config, score_answers)


def __getattr__(name: str) -> Any:
    if name in __all__:
        from apibank_bench import api

        value = getattr(api, name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'apibank_bench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
