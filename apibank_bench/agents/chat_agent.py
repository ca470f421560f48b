"""The pieces every topology is built from: an agent asking (its turn: turn.py) and inter-agent messages (votes: vote.py)."""

from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from typing import Any

from apibank_bench.llm import ChatClient, Completion, ModelError, call_extra_body
from apibank_bench.scoring.parsing import candidates
from apibank_bench.data.tasks import Task
from apibank_bench.agents.prompts import role_prompt, task_prompt, visible_schemas
from apibank_bench.agents.seeds import agent_seed
from apibank_bench.agents.solution import Solution
from apibank_bench.scoring.answered_by import AnsweredBy
from apibank_bench.agents.turn import AgentTurn
from apibank_bench.agents.team_models import TeamModels
from apibank_bench.agents.vote import canonical_text

#: Epoch e of a run (`--apibank-epochs`) samples with every seed moved by e * EPOCH_SEED_STRIDE, so
#: epoch 0 sends the protocol's own seeds; the stride is far above any seed a team of 10 uses in
#: 99 rounds, so two epochs never share a seed (nor a cached answer).
EPOCH_SEED_STRIDE = 10_000
#: The epoch the current instance is solved for: set around one solve (`solving_epoch`), it reaches
#: every agent of the team, LangGraph's node threads included (they run in a copy of the context).
_EPOCH: contextvars.ContextVar[int] = contextvars.ContextVar("apibank_epoch", default=0)


@contextmanager
def solving_epoch(epoch: int):
    token = _EPOCH.set(epoch)
    try:
        yield
    finally:
        _EPOCH.reset(token)


class Agents:
    """What the agents of one run share: the models, the prompts, the decoding settings.

    These are `chat` agents (one chat completion answering with the bracketed call);
    agents/kinds.py lists the other kinds, which keep this `ask` signature. `model` is one client,
    or the run's `TeamModels` (a model per role): each agent asks its role's client (`client`).
    """

    def __init__(self, model: "ChatClient | TeamModels", topology: str, prompts_dir: str | None = None,
                 message_format: str = "freeform", team_size: int = 1, *,
                 tool_parse: str = "both", history: str = "text", seeds_by_round: bool = False) -> None:
        self.models = TeamModels.of(model)
        self.model = self.models.default  #: the `--model` client (the run's seed and settings)
        self.topology = topology
        self.prompts_dir = prompts_dir
        self.message_format = message_format
        self.team_size = team_size
        self.tool_parse = tool_parse  #: where a function-calling agent's tool call is read (agents.tool_answer)
        self.history = history  #: how a function-calling agent is sent the dialogue (agents.tool_history)
        self.seeds_by_round = seeds_by_round  #: the topology's spec says its rounds are numbered (seeds.py)
        self._grammars: dict[tuple[str, str], dict] = {}  #: (task ID, server kind) -> its grammar field

    def ask(self, task: Task, role: str, context: str = "", *, index: int = 0, round: int = 0) -> AgentTurn:
        """One agent's answer on the whole task (plus `context` from its team); a model error is
        recorded on the turn, never raised.

        Each agent samples with its own seed, the reference's (`seeds.agent_seed`), so a
        team is not N copies of one cached answer.
        """
        client = self.client(role, index)
        extra = self.grammar(task, client) if client.config.use_grammar else None
        turn = AgentTurn(role=role, messages=self.messages(task, role, context), round=round, index=index,
                         model=client.config.model)
        try:
            completion = client.complete(turn.messages, extra_body=extra, seed=self.seed(index, round))
        except ModelError as exc:
            completion = exc.completion
            turn.error, turn.failure = str(exc), exc.failure
        return self.answered(turn, completion, completion.text or "")

    def client(self, role: str, index: int = 0) -> ChatClient:
        """The client that answers the agent at place `index` playing `role`."""
        return self.models.for_agent(role, index)

    def grammar(self, task: Task, client: ChatClient | None = None) -> dict:
        """The request field that constrains an answer to one call of `task`'s visible APIs, in the dialect of
        `client`'s server (default: `--model`'s), built once per task and server kind."""
        kind = (client or self.model).config.server_kind
        if (task.combined_id, kind) not in self._grammars:
            self._grammars[task.combined_id, kind] = call_extra_body(visible_schemas(task), kind)
        return self._grammars[task.combined_id, kind]

    def messages(self, task: Task, role: str, context: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": role_prompt(self.topology, role, self.prompts_dir)},
                {"role": "user", "content": task_prompt(task, context)}]

    def seed(self, index: int, round: int) -> int:
        """The agent's sampling seed: the reference's numbering (`seeds.agent_seed`) from the run's seed,
        moved by the epoch's offset."""
        base = self.model.config.seed + EPOCH_SEED_STRIDE * _EPOCH.get()
        return agent_seed(base, round, index, self.team_size, self.seeds_by_round)

    @staticmethod
    def answered(turn: AgentTurn, completion: Completion, answer: str) -> AgentTurn:
        """The turn with its answer, the path it came through and the completion's usage filled in."""
        turn.answer = answer
        if turn.error or turn.answered_by is None:  # a chat agent answers in text; a failed request answers nothing
            turn.answered_by = AnsweredBy.NONE if turn.error or not answer.strip() else AnsweredBy.TEXT
        call = turn.submitted().call
        turn.call = None if call is None else canonical_text(call)
        turn.prompt_tokens, turn.completion_tokens = completion.prompt_tokens, completion.completion_tokens
        turn.latency_s, turn.cached = completion.latency_s, completion.cached
        turn.finish_reason = completion.finish_reason
        return turn


def final_answer(turn: AgentTurn | None) -> str | None:
    """The call text a turn submits: its chosen bracketed call, else its raw answer."""
    return None if turn is None else turn.submitted().text


# -- inter-agent messages --------------------------------------------------------------

#: The reference's cuts, both keeping the last characters: each quoted answer, and a block of them.
QUOTE_CHARS, BLOCK_CHARS = 1200, 5000


def quote(answer: str) -> str:
    """An answer as another agent is shown it: its last 1,200 characters, as written."""
    return answer[-QUOTE_CHARS:]


def report(turn: AgentTurn, message_format: str) -> str:
    """What one agent passes to another, in the run's message format.

    `freeform`: the answer as written; `semi_structured`: labelled sections;
    `structured_soft`: a JSON-like report with a free-text field. The format
    changes only what agents tell each other, never the final output contract.
    """
    text = quote(turn.answer)
    if message_format == "freeform":
        return f"{turn.role}: {text}"  # as long as the reference's "role:\n" label, so its cut falls alike
    proposed = turn.call or "none (no parseable call)"
    reasoning = text
    for call in candidates(text):  # cut exactly the call spans, keeping any prose between two calls
        reasoning = reasoning.replace(call, "", 1)
    reasoning = reasoning.strip() or "-"
    if message_format == "semi_structured":
        return f"ROLE: {turn.role}\nPROPOSED CALL: {proposed}\nNOTES: {reasoning}"
    return json.dumps({"role": turn.role, "proposed_call": proposed, "parsed": turn.call is not None,
                       "notes": reasoning}, ensure_ascii=False)


def reports(turns: list[AgentTurn], message_format: str) -> str:
    """The block of `turns`' reports: empty answers left out (as the reference does), a blank line
    between reports, cut to its last 5,000 characters (at N = 8 about four debaters' answers survive)."""
    return "\n\n".join(report(turn, message_format) for turn in turns if turn.answer)[-BLOCK_CHARS:]


def solution_from(turns: list[AgentTurn], chosen: AgentTurn | None, trace: dict[str, Any]) -> Solution:
    """Sum a team's turns into the Solution the scorer reads."""
    errors = [turn.error for turn in turns if turn.error]
    answer = final_answer(chosen)
    return Solution(
        answer=answer,
        trace=trace,
        turns=list(turns),
        prediction=None if chosen is None else chosen.submitted(),
        # a team whose vote nobody won submits nothing: no path answered
        answered_by=chosen.answered_by if chosen is not None else AnsweredBy.NONE if turns else None,
        prompt_tokens=sum(turn.prompt_tokens for turn in turns),
        completion_tokens=sum(turn.completion_tokens for turn in turns),
        model_calls=len(turns),
        error=(errors[-1] if errors and not answer else None),
    )
