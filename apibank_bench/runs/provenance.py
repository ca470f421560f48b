"""What a run's summary records about where its numbers came from: the model and its sampling, the
data, manifest and prompts (as hashes), the endpoint's own description, the command, times, code."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from typing import Any
from datetime import datetime, timezone
from functools import cache
from importlib import metadata

from apibank_bench.core.paths import LOCK_FILE, PROJECT_ROOT, in_checkout

_PACKAGES = ("apibank-bench", "pytest", "pytest-xdist", "openai", "langgraph", "openai-agents",
             "sentence-transformers", "torch", "llama_cpp_python")


@cache
def git_revision() -> str | None:
    """The checkout's commit; None for an installed package (whose version `packages` records): asked from
    site-packages, git would answer with whatever repository the virtualenv happens to lie in."""
    if not in_checkout():
        return None
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


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def command_line(secrets: tuple[str, ...] = ()) -> str:
    from apibank_bench.core.redact import redact

    return redact(" ".join(sys.argv), secrets)


def provenance(cfg, selected_ids: list[str] | None = None, started_at: str | None = None,
               base_url: str | None = None, clients: Any = None) -> dict:
    """`summary.json`'s record of a run. `base_url`: where the model answered (asked for /models); `clients`: the
    run's, if this process built them (their settings are described: agents.models.describe_model)."""
    from apibank_bench.agents.models import describe_model
    from apibank_bench.llm.probe import endpoint_models
    from apibank_bench.agents.prompts import role_prompt
    from apibank_bench.agents.topologies import as_run, roles

    base_url = base_url or (cfg.base_url[0] if cfg.base_url else None)
    models = None if cfg.is_gold else endpoint_models(base_url)
    record = {"model": describe_model(cfg, models, clients), "git_revision": git_revision(), "packages": package_versions()}
    prompts = {}
    if not cfg.is_gold:
        topology = as_run(cfg)[0].name
        prompts = {role: sha256_text(role_prompt(topology, role, cfg.prompts_dir)) for role in roles(cfg)}
    record["provenance"] = {
        "command_line": command_line((cfg.api_key,)),
        "started_at": started_at,
        "finished_at": now(),
        "data_hash": hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest(),
        "manifest_hash": sha256_text(json.dumps(selected_ids)) if selected_ids is not None else None,
        "prompt_hashes": prompts,
        "endpoint_models": models,
    }
    return record
