"""What a run's summary records about where its numbers came from."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib import metadata

from .paths import PROJECT_ROOT

_PACKAGES = ("apibank-bench", "pytest", "pytest-xdist", "openai", "langgraph", "openai-agents",
             "sentence-transformers", "torch", "llama_cpp_python")


@cache
def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() + ("+dirty" if dirty else "")) or None


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def provenance(cfg) -> dict:
    from .agents.models import describe_model

    return {"model": describe_model(cfg), "git_revision": git_revision(), "packages": package_versions()}
