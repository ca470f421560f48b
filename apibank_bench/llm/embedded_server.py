"""llama-cpp-python's OpenAI-compatible server, with a grammar stage that checks the tokens that
can be sampled before the rest (`python -m apibank_bench.llm.embedded_server`, the options of
`python -m llama_cpp.server`; `LocalServer` starts it).

llama-cpp-python samples with one llama.cpp chain, penalties -> grammar -> top_k -> typical ->
top_p -> min_p -> temp -> dist (penalties -> grammar -> greedy at temperature 0), applied to the
whole vocabulary at every token: the grammar stage matches all 262,144 of Gemma's pieces against
the grammar, 0.1-0.2 s a token on 2 cores, more than the model's own step. Yet only the top_k
highest tokens the grammar admits reach the later stages (the highest one at temperature 0).

`FirstAdmittedSampler` keeps llama-cpp-python's chain and its state (penalty history, grammar
stacks, random generator) and changes which tokens the grammar stage checks. It applies the
penalties to the whole vocabulary (cheap), then hands the rest of the chain

- the first top_k admitted among the highest 8 x top_k tokens (then 64 x top_k), sorted by logit,
  ties by token id, when there are top_k of them and no token left out ties the window's lowest
  logit: the very candidates, in the same order, that top_k keeps after the full pass, so the same
  token comes out with the same random draw (inside a string, where most pieces are admitted);
- otherwise every admitted token, found through the PieceTree (a name, a keyword, punctuation:
  few pieces admitted), in token order: the full pass's array less its rejected tokens, which
  top_k ranks last and which get probability 0;
- the full pass itself only after a token that ended inside a UTF-8 character.

The tree's answer depends only on the grammar's state, which depends only on the grammar and the
tokens accepted so far; so it is remembered (`REMEMBERED_BYTES` of answers) by grammar and tokens: a team's
agents answer one task with one grammar, and their answers share beginnings (the call's name, its
first argument), which the tree then searches once for the whole team, not once per agent.

llama.cpp's own `common_sampler` samples first and checks only the sampled token, which can give
another token than the full pass; this one gives the full pass's token, up to exactly equal logits
that the two passes may order differently (tests/test_embedded_server.py compares the two
samplers' tokens on real instances).

A request with `tools` is answered by tool calls (`tool_handler`, llm/embedded_tools.py): the model's
own chat handler, with the tools offered in the prompt and the call constrained by their schemas.
Without tools the model's own handler gets the request unchanged.
"""

from __future__ import annotations

import ctypes
from collections import Counter, OrderedDict
from typing import Any, Callable

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import llama_cpp as lib
from llama_cpp._internals import LlamaSampler

from apibank_bench.llm.embedded_tools import with_tools

#: One llama_token_data (id, logit, p) as numpy sees it: arrays of it are handed to llama.cpp as they are.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
assert TOKEN_DATA.itemsize == ctypes.sizeof(lib.llama_token_data)
#: The windows checked before the full pass, as multiples of top_k (1 at temperature 0).
WINDOWS = (8, 64)
#: Bytes of the tree's answers kept (by grammar and tokens accepted before; the least recently used dropped
#: first): at a name or punctuation a few hundred bytes each, so a team's over many instances.
REMEMBERED_BYTES = 32 << 20


class Remembered:
    """The tree's answers (admitted token ids, in token order) by grammar and the tokens accepted before."""

    def __init__(self, budget: int = REMEMBERED_BYTES) -> None:
        self.budget, self.size = budget, 0
        self.answers: OrderedDict[tuple[Any, ...], npt.NDArray[np.int32]] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> npt.NDArray[np.int32] | None:
        ids = self.answers.get(key)
        if ids is not None:
            self.answers.move_to_end(key)
        return ids

    def put(self, key: tuple[Any, ...], ids: npt.NDArray[np.int32]) -> None:
        self.answers[key] = ids
        self.size += ids.nbytes
        while self.size > self.budget:
            self.size -= self.answers.popitem(last=False)[1].nbytes


_ADMITTED = Remembered()


def _apply(sampler: Any, data: npt.NDArray[Any]) -> None:
    """Apply a llama.cpp sampler that only changes logits (penalties, grammar) to `data`, in place."""
    array = lib.llama_token_data_array(
        data=data.ctypes.data_as(lib.llama_token_data_p), size=len(data), selected=-1, sorted=False)
    lib.llama_sampler_apply(sampler, ctypes.byref(array))


class PieceTree:
    """The vocabulary as a tree of pieces: a token's parent is the token whose piece is its longest
    proper prefix (whole characters). The grammar reads a piece character by character, so a token
    whose parent it rejects it rejects too: checking the roots, then the children of what it
    admitted, and so on, finds every admitted token without checking the rest.

    Roots: tokens with no such prefix, end-of-generation tokens (the grammar admits those by its
    state, not their piece) and pieces that are not whole UTF-8 characters (`partial`: after one of
    those the grammar's next character is not the next piece's first, so the caller checks all)."""

    def __init__(self, vocab: Any, n_vocab: int) -> None:
        buffer = ctypes.create_string_buffer(256)
        pieces: list[str | None] = []
        partial = np.zeros(n_vocab, dtype=bool)
        for token in range(n_vocab):
            size = lib.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)  # as the grammar reads it
            piece = None
            if size > 0 and not lib.llama_vocab_is_eog(vocab, token):
                try:
                    piece = buffer.raw[:size].decode("utf-8")
                except UnicodeDecodeError:
                    partial[token] = True
            pieces.append(piece)
        first: dict[str, int] = {}  # piece -> its first token (another token with the same piece is its child)
        for token, piece in enumerate(pieces):
            if piece:
                first.setdefault(piece, token)
        parent = np.full(n_vocab, -1, dtype=np.int64)
        for token, piece in enumerate(pieces):
            if not piece:
                continue
            if first[piece] != token:
                parent[token] = first[piece]
                continue
            for end in range(len(piece) - 1, 0, -1):
                if piece[:end] in first:
                    parent[token] = first[piece[:end]]
                    break
        self.partial = partial
        self.roots = np.flatnonzero(parent < 0).astype(np.int32)
        order = np.argsort(parent, kind="stable")  # children grouped by parent, roots (-1) first
        self.children = order[np.count_nonzero(parent < 0):].astype(np.int32)
        self.start = np.searchsorted(parent[self.children], np.arange(n_vocab + 1))

    def children_of(self, tokens: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        starts, ends = self.start[tokens], self.start[tokens + 1]
        counts = ends - starts
        if not counts.sum():
            return self.children[:0]
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        return self.children[offsets + np.arange(counts.sum())]


class FirstAdmittedSampler:
    """llama-cpp-python's chain penalties -> grammar -> rest, the grammar checking the tokens that can win."""

    def __init__(self, sampler: LlamaSampler, tree: PieceTree, top_k: int, grammar: str | None = None) -> None:
        self.inner = sampler  # owns the chain (and frees it)
        #: what the grammar's state is a function of, with `accepted` (the tree's answers are remembered by it;
        #: None: its text is unknown, nothing is remembered)
        self.grammar_key = None if grammar is None else (id(tree), grammar)
        self.accepted: list[int] = []
        self.chain = sampler.sampler
        stages = [lib.llama_sampler_chain_get(self.chain, i) for i in range(lib.llama_sampler_chain_n(self.chain))]
        self.penalties, self.grammar, *self.rest = stages
        self.tree = tree
        self.top_k = top_k
        n_vocab = len(tree.partial)
        self.ids = np.arange(n_vocab, dtype=np.int32)
        self.vocab = np.zeros(n_vocab, dtype=TOKEN_DATA)
        self.after_partial = False  # the last token ended inside a UTF-8 character
        #: How each token was decided: "window<N>", "tree" or "full".
        self.decided: Counter[str] = Counter()

    @staticmethod
    def fits(sampler: LlamaSampler) -> bool:
        """The chain is penalties, grammar, then more (what `_init_sampler` builds with a grammar)."""
        n = lib.llama_sampler_chain_n(sampler.sampler)
        names = [lib.llama_sampler_name(lib.llama_sampler_chain_get(sampler.sampler, i)) for i in range(n)]
        return n > 2 and names[:2] == [b"penalties", b"grammar"]

    @staticmethod
    def highest(logits: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """The `count` highest tokens, highest logit first, ties by token id. A threshold from a
        1/64 sample keeps a superset of them (np.argpartition over 262,144 strided floats costs
        10-15 ms a token, as much as the rest of the stage)."""
        sample = logits[::64]
        rank = min(len(sample), 2 * (count // 64) + 8)
        threshold = np.partition(sample, len(sample) - rank)[len(sample) - rank]
        kept = np.flatnonzero(logits >= threshold)
        if len(kept) < count:  # the sample was unlucky: the threshold from the whole vocabulary
            kept = np.flatnonzero(logits >= np.partition(logits, len(logits) - count)[len(logits) - count])
        return kept[np.lexsort((kept, -logits[kept]))][:count]

    def candidates(self, logits: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        """What the rest of the chain gets: the first top_k admitted tokens, or all of them."""
        vocab = self.vocab
        vocab["id"] = self.ids  # a full pass leaves it sorted
        vocab["logit"] = logits
        vocab["p"] = 0.0
        _apply(self.penalties, vocab)
        for window in (self.top_k * widen for widen in WINDOWS):
            if window >= len(vocab):
                break
            top = self.highest(vocab["logit"], window)
            checked = vocab[top]  # a copy: the grammar marks rejected tokens -inf
            _apply(self.grammar, checked)
            admitted = checked[checked["logit"] != -np.inf]
            # The window is the `window` highest tokens only if no token left out ties its lowest logit.
            if len(admitted) >= self.top_k and np.count_nonzero(vocab["logit"] >= vocab["logit"][top[-1]]) == window:
                self.decided[f"window{window}"] += 1
                return admitted[: self.top_k]
        if not self.after_partial:
            key = None if self.grammar_key is None else (*self.grammar_key, tuple(self.accepted))
            ids = None if key is None else _ADMITTED.get(key)
            if ids is None:
                found, frontier = [], self.tree.roots
                while len(frontier):
                    checked = vocab[frontier]
                    _apply(self.grammar, checked)
                    passed = checked["logit"] != -np.inf
                    found.append(frontier[passed])
                    frontier = self.tree.children_of(frontier[passed])
                ids = np.sort(np.concatenate(found))
                if key is not None:
                    _ADMITTED.put(key, ids)
            else:
                self.decided["remembered"] += 1
            if len(ids):
                self.decided["tree"] += 1
                # the full pass's order (vocab's rows are in token order), less its rejected tokens
                return vocab[ids]
        self.decided["full"] += 1
        _apply(self.grammar, vocab)
        return vocab

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """Sample and accept a token from the idx-th logits, as `llama_sampler_sample` does with the chain."""
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(len(self.vocab),))
        data = self.candidates(logits)
        # The later stages share one array, as in the chain: a stage may shrink it or point it elsewhere.
        array = lib.llama_token_data_array(
            data=data.ctypes.data_as(lib.llama_token_data_p), size=len(data), selected=-1, sorted=False)
        for stage in self.rest:
            lib.llama_sampler_apply(stage, ctypes.byref(array))
        assert 0 <= array.selected < array.size
        token = int(array.data[array.selected].id)
        lib.llama_sampler_accept(self.chain, token)
        self.accepted.append(token)
        self.after_partial = bool(self.tree.partial[token])
        return token

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_TREES: dict[int, PieceTree] = {}


def piece_tree(llama: llama_cpp.Llama) -> PieceTree:
    """The model's PieceTree, built once (about 3 s for Gemma's 262,144 tokens)."""
    key = ctypes.cast(llama._model.vocab, ctypes.c_void_p).value or 0
    if key not in _TREES:
        _TREES[key] = PieceTree(llama._model.vocab, llama.n_vocab())
    return _TREES[key]


def first_admitted(init_sampler: Callable[..., Any]) -> Callable[..., Any]:
    """`Llama._init_sampler` returning a FirstAdmittedSampler where it gives the same tokens: a
    grammar, no logits processor, no mirostat, and greedy (temperature 0) or top_k > 0."""

    def init(self: llama_cpp.Llama, **params: Any) -> Any:
        sampler = init_sampler(self, **params)
        temp, top_k = params.get("temp", 0.8), params.get("top_k", 40)
        if (params.get("grammar") is None or params.get("logits_processor") is not None
                or params.get("mirostat_mode", 0) != 0 or temp < 0 or (temp > 0 and top_k <= 0)
                or not FirstAdmittedSampler.fits(sampler)):
            return sampler
        grammar = getattr(params["grammar"], "_grammar", None)
        return FirstAdmittedSampler(sampler, piece_tree(self), 1 if temp == 0 else top_k,
                                    grammar if isinstance(grammar, str) else None)

    return init


def tool_handler(llama: llama_cpp.Llama) -> Callable[..., Any]:
    """The handler `create_chat_completion` would use (the chat format's, or the file's own template's),
    answering requests with `tools` by tool calls (llm/embedded_tools.py); without tools it is unchanged."""
    from llama_cpp import llama_chat_format

    inner = llama.chat_handler
    if inner is None:
        assert llama.chat_format is not None  # Llama.__init__ sets one when it is given no handler
        inner = (llama._chat_handlers.get(llama.chat_format)
                 or llama_chat_format.get_chat_completion_handler(llama.chat_format))
    return with_tools(inner)


def main() -> None:
    init = llama_cpp.Llama.__init__

    def init_and_index(self: llama_cpp.Llama, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        piece_tree(self)  # at start-up, not in the first request
        self.chat_handler = tool_handler(self)

    llama_cpp.Llama.__init__ = init_and_index  # type: ignore[method-assign]
    llama_cpp.Llama._init_sampler = first_admitted(llama_cpp.Llama._init_sampler)  # type: ignore[method-assign]
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
