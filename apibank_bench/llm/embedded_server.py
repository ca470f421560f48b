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
penalties to the whole vocabulary (cheap), sorts the highest `window` tokens by logit (ties by
token id), checks only those against the grammar, and hands the rest of the chain

- the first top_k admitted, when the window holds top_k admitted tokens and no token left out
  ties its lowest logit: the very candidates, in the same order, that top_k keeps after the full
  pass, so the same token comes out with the same random draw;
- all the window's admitted tokens, when fewer but every token left out is more than NEGLIGIBLE
  (18) below the highest admitted logit, and top_p < 1 with typical_p off: a left-out token
  would add less than 2^-25 of the highest one's weight to top_p's float sum (which is at least
  1), so it changes no bit of any probability, and top_p's cut falls before it;
- otherwise, after widening the window twice, the full pass itself (every token checked).

llama.cpp's own `common_sampler` samples first and checks only the sampled token, which can give
a different token than the full pass; this one gives the full pass's token (tests/test_embedded_server.py
compares the two samplers' token sequences on real instances).
"""

from __future__ import annotations

import ctypes
from collections import Counter
from typing import Any, Callable

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import llama_cpp as lib
from llama_cpp._internals import LlamaSampler

#: One llama_token_data (id, logit, p) as numpy sees it: arrays of it are handed to llama.cpp as they are.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
assert TOKEN_DATA.itemsize == ctypes.sizeof(lib.llama_token_data)
#: The windows checked before the full pass, as multiples of top_k (1 at temperature 0).
WINDOWS = (8, 64, 512)
#: Logit distance below the highest admitted token beyond which a token weighs < 2^-25 of it (e^-18).
NEGLIGIBLE = 18.0


def _apply(sampler: Any, data: npt.NDArray[Any]) -> None:
    """Apply a llama.cpp sampler that only changes logits (penalties, grammar) to `data`, in place."""
    array = lib.llama_token_data_array(
        data=data.ctypes.data_as(lib.llama_token_data_p), size=len(data), selected=-1, sorted=False)
    lib.llama_sampler_apply(sampler, ctypes.byref(array))


class FirstAdmittedSampler:
    """llama-cpp-python's chain penalties -> grammar -> rest, the grammar checking the highest tokens first."""

    def __init__(self, sampler: LlamaSampler, n_vocab: int, top_k: int, negligible: float | None) -> None:
        self.inner = sampler  # owns the chain (and frees it)
        self.chain = sampler.sampler
        stages = [lib.llama_sampler_chain_get(self.chain, i) for i in range(lib.llama_sampler_chain_n(self.chain))]
        self.penalties, self.grammar, *self.rest = stages
        self.top_k = top_k
        self.negligible = negligible
        self.ids = np.arange(n_vocab, dtype=np.int32)
        self.vocab = np.zeros(n_vocab, dtype=TOKEN_DATA)
        #: How each token was decided: "window<N>", "negligible<N>" or "full".
        self.decided: Counter[str] = Counter()

    @staticmethod
    def fits(sampler: LlamaSampler) -> bool:
        """The chain is penalties, grammar, then more (what `_init_sampler` builds with a grammar)."""
        n = lib.llama_sampler_chain_n(sampler.sampler)
        names = [lib.llama_sampler_name(lib.llama_sampler_chain_get(sampler.sampler, i)) for i in range(n)]
        return n > 2 and names[:2] == [b"penalties", b"grammar"]

    def candidates(self, logits: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        """What the rest of the chain gets: the full pass's admitted tokens, or the ones that decide."""
        vocab = self.vocab
        vocab["id"] = self.ids  # a full pass leaves it sorted
        vocab["logit"] = logits
        vocab["p"] = 0.0
        _apply(self.penalties, vocab)
        for window in (self.top_k * widen for widen in WINDOWS):
            if window >= len(vocab):
                break
            top = np.argpartition(-vocab["logit"], window)[:window]
            top = top[np.lexsort((top, -vocab["logit"][top]))]  # highest logit first, ties by token id
            edge = vocab["logit"][top[-1]]
            checked = vocab[top]  # a copy: the grammar marks rejected tokens -inf
            _apply(self.grammar, checked)
            admitted = checked[checked["logit"] != -np.inf]
            if len(admitted) >= self.top_k and np.count_nonzero(vocab["logit"] >= edge) == window:
                self.decided[f"window{window}"] += 1
                return admitted[: self.top_k]
            if self.negligible is not None and len(admitted) and edge < admitted["logit"][0] - self.negligible:
                self.decided[f"negligible{window}"] += 1
                return admitted
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
        return token

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


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
        if temp == 0:
            return FirstAdmittedSampler(sampler, self.n_vocab(), 1, None)
        cuts = params.get("top_p", 0.95) < 1 and params.get("typical_p", 1.0) >= 1
        return FirstAdmittedSampler(sampler, self.n_vocab(), top_k, NEGLIGIBLE if cuts else None)

    return init


def main() -> None:
    llama_cpp.Llama._init_sampler = first_admitted(llama_cpp.Llama._init_sampler)  # type: ignore[method-assign]
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
