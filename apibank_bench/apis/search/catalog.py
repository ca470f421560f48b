"""Upstream ToolSearcher's search: the catalog it searches and its best-match rule.

Shared by our two ToolSearcher APIs (catalogs built from `apibank_bench.data.specs`) and
by the frozen `official` scorer (a catalog of recorded ToolSearcher outputs).
Embeddings come from `apibank_bench.apis.search.model`, imported only when a search runs;
each catalog embeds its texts once per process (and once more with sentence-transformers if
keywords that are not a str are searched).
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any, Mapping, Sequence

from apibank_bench.data import specs
from apibank_bench.core.frozen import freeze, thaw

#: The file upstream's ToolSearcher leaves out of the folder it lists (besides
#: `__init__.py` and `api.py`, which are not in our specs).
SEARCHER_FILE = "tool_search.py"


def split_api_name(name: str) -> str:
    """Upstream's class-name split: each capital becomes a space + its lowercase, then strip.

    "GetUserToken" -> "get user token"; "DocumentQA" -> "document q a".
    """
    return "".join(" " + char.lower() if char.isupper() else char for char in name).strip()


def search_text(name: str, description: str) -> str:
    """Upstream's `desc_for_search`. Quirk: no separator between name and description."""
    return split_api_name(name) + description


class Catalog:
    """APIs to search, in order, each with the text its embedding is computed from."""

    def __init__(self, entries: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> None:
        if len(entries) != len(texts):
            raise ValueError("one search text per entry")
        self.entries = tuple(freeze(dict(entry)) for entry in entries)
        self.texts = tuple(texts)
        self._embeddings: list | None = None
        self._units: Any = None  #: the embeddings scaled to length 1, one row per entry
        self._st_embeddings: list | None = None
        self._lock = threading.Lock()

    def index(self, name: str) -> int:
        for i, entry in enumerate(self.entries):
            if entry["name"] == name:
                return i
        raise KeyError(name)

    def embeddings(self) -> list:
        """One `encode(text)` per entry, as upstream computes them (computed once)."""
        with self._lock:
            if self._embeddings is None:
                from apibank_bench.apis.search import model as embedding

                self._embeddings = embedding.encode_catalog(self.texts)
                self._units = _unit_rows(self._embeddings) if self.texts else None
            return self._embeddings

    def best(self, keywords: Any) -> int | None:
        """Index of the best match for `keywords`, or None when no similarity is above 0.

        Upstream's rule: cosine similarity of `encode(keywords)` with each entry's
        embedding, a strict `>` against the best so far (starting at 0), so a tie
        goes to the earlier entry. `keywords` is passed to `encode` untouched, so
        non-string input fails as it does upstream.
        """
        if not isinstance(keywords, str):
            return self._best_by_sentence_transformers(keywords)
        from apibank_bench.apis.search import model as embedding

        self.embeddings()  # loads the model: ModelUnavailable if it cannot
        keyword_embedding = embedding.encode(keywords)
        # util.cos_sim's arithmetic in numpy: each vector over its length, then the dot product, float32.
        scores = (self._units @ _unit_rows([keyword_embedding])[0]).tolist() if self.texts else []
        return _first_best(scores)

    def _best_by_sentence_transformers(self, keywords: Any) -> int | None:
        """`best` as upstream computes it, with sentence-transformers and torch, for keywords that are
        not a str: what its `encode` and `util.cos_sim(...).item()` make of a list, a number, None or a
        dict (an answer, a wrong type, an error) is theirs to say, so they say it."""
        from apibank_bench.apis.search import model as embedding

        with self._lock:
            if self._st_embeddings is None:
                self._st_embeddings = [embedding.encode_by_sentence_transformers(text) for text in self.texts]
        keyword_embedding = embedding.encode(keywords)
        from sentence_transformers import util

        return _first_best(util.cos_sim(keyword_embedding, desc).item() for desc in self._st_embeddings)


def _unit_rows(vectors: Sequence[Any]):
    """The vectors as float32 rows, each divided by its length (at least 1e-12, as torch's `normalize`)."""
    import numpy as np

    rows = np.stack([np.asarray(vector, dtype=np.float32).ravel() for vector in vectors])
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), np.float32(1e-12))


def _first_best(scores) -> int | None:
    best, best_score = None, 0
    for i, score in enumerate(scores):
        if score > best_score:
            best, best_score = i, score
    return best


_CATALOG_LOCK = threading.Lock()


def spec_catalog(api_set: str) -> Catalog:
    """The catalog upstream's ToolSearcher of `api_set` searches: every other API of the set.

    Entries are {name, description, input_parameters, output_parameters,
    desc_for_search}, the dict upstream builds per class. Upstream lists its folder
    with `os.listdir`, whose order depends on the filesystem; we use the sorted
    file names (the spec's `file`), which decides which API wins a tie.
    """
    with _CATALOG_LOCK:
        return _spec_catalog(api_set)


@cache
def _spec_catalog(api_set: str) -> Catalog:
    items = sorted(
        (item for item in specs.specs(api_set).values() if item["file"] != SEARCHER_FILE),
        key=lambda item: item["file"],
    )
    entries = [
        {
            "name": item["name"],
            "description": item["description"],
            "input_parameters": item["input_parameters"],
            "output_parameters": item["output_parameters"],
            "desc_for_search": search_text(item["name"], item["description"]),
        }
        for item in items
    ]
    return Catalog(entries, [entry["desc_for_search"] for entry in entries])


def public_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A mutable copy of a spec-catalog entry without its `desc_for_search` (upstream pops it)."""
    payload = thaw(entry)
    payload.pop("desc_for_search")
    return payload
