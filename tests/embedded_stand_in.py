"""A pytest plugin for one test: the embedded model is a local stand-in (openai_stub) instead of
llama-cpp-python's server, and every start is logged (the process that started it) to
$APIBANK_STARTS_LOG, so a test can count how many servers an xdist run starts and where."""

import os

from apibank_bench.llm import embedded_launcher
from openai_stub import OpenAIStub, Reply


class _StandIn:
    def __init__(self) -> None:
        self.stub = OpenAIStub(default=Reply("[GetToday()]")).start()
        self.base_url = self.stub.url

    def stop(self, timeout: float = 10.0) -> None:  # as the real server's (llm.embedded_launcher)
        self.stub.kill()


def _start(choice, root=None, prompts=(), max_tokens=None):
    with open(os.environ["APIBANK_STARTS_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()}\n")
    return _StandIn()


embedded_launcher.start_embedded = _start
