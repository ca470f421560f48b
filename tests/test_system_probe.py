"""A server whose chat template drops the system message is found out by a probe, and the run folds the system
prompt into the first user message as for the embedded model (llm.probe.system_folding)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from apibank_bench.core import settings
from apibank_bench.core.paths import PROJECT_ROOT
from apibank_bench.llm.probe import forget_probes, probe_system, system_folding
from openai_stub import OpenAIStub, Reply


@pytest.fixture(autouse=True)
def fresh_probes():
    forget_probes()
    yield
    forget_probes()


def cfg(url: str, **options):
    options = {"base_url": url, "model": "gemma", **options}
    return settings.resolve(lambda s: options.get(s.name), lambda s: None, environ={})


def models(owner: str | None) -> dict:
    return {"object": "list", "data": [{"id": "gemma", "object": "model", "owned_by": owner}]}


@pytest.mark.parametrize("drops", [True, False])
def test_the_probe_tells_a_template_that_drops_the_system_message(drops):
    with OpenAIStub(drops_system=drops) as stub:
        probe = probe_system(stub.url, "gemma", "k", 5.0)
        assert probe.kept is (not drops) and len(stub.probes) == 2
        assert probe_system(stub.url, "gemma", "k", 5.0) is probe and len(stub.probes) == 2  # once a run
        fold, why = system_folding(cfg(stub.url), models("me"))
    assert fold is drops
    assert ("drops system messages" in why) is drops and "prompt tokens with a system message" in why


def test_a_server_without_token_counts_is_not_folded_for_and_says_so():
    bare = Reply(raw=b'{"choices": [{"message": {"role": "assistant", "content": "Yes"}}]}')
    with OpenAIStub(default=bare) as stub:
        stub._is_probe = lambda body: False  # a server that answers the probe like any request, without usage
        fold, why = system_folding(cfg(stub.url, server_kind="llama.cpp"), models("llamacpp"))
    assert fold is False and "unknown" in why


@pytest.mark.parametrize("owner, kind", [("vllm", "auto"), ("openai", "auto"), (None, "auto"), ("sglang", "auto"), ("llamacpp", "openai")])
def test_servers_that_apply_the_model_s_own_template_are_not_probed(owner, kind):
    with OpenAIStub(drops_system=True, owned_by=owner) as stub:
        fold, why = system_folding(cfg(stub.url, server_kind=kind), models(owner))
        assert fold is False and "not probed" in why and stub.probes == []


def test_a_run_against_llama_cpp_python_s_gemma_template_folds_the_system_prompt(tmp_path):
    """The issue's case: llama-cpp-python (`owned_by: "me"`) with `--chat_format gemma`, which drops system
    messages: the run's requests carry the system prompt in the first user message, and summary.json says why."""
    with OpenAIStub(owned_by="me", drops_system=True) as stub:
        done = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--out-dir", str(tmp_path), "--limit",
                               "1", "--base-url", stub.url, "--model", "gemma", "--no-cache",
                               "--server-kind", "llama.cpp"],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 1), done.stderr[-3000:]
        sent = stub.chat_requests
    assert sent and all(m["role"] != "system" for body in sent for m in body["messages"])
    first_user = next(m for m in sent[0]["messages"] if m["role"] == "user")
    assert len(first_user["content"]) > 500  # the system prompt (the task's APIs) is in it
    model = json.loads((tmp_path / "summary.json").read_text())["config"]["model"]
    assert model["fold_system"] is True and "drops system messages" in model["fold_system_from"]
