"""Local text search for SearchEngine: NLTK-style word tokens and Okapi BM25.

Upstream ranks its SearchEngine database with the third-party packages `nltk`
(`word_tokenize`, version 3.6.5 pinned by upstream) and `rank_bm25` (`BM25Okapi`).
Both computations are small, so they are reimplemented here:

* `word_tokens` applies the rewrite rules of NLTK 3.6.5's Treebank-style word
  tokenizer. Documented difference: NLTK first splits the text into sentences with
  its trained Punkt model (data we do not have offline); we treat the whole text as
  one sentence. The tokens differ only when a word ending in '.' is followed by more
  text and Punkt judges it a sentence end ("solar power. wind" gives 'power', '.'
  upstream and 'power.' here); a final '.', '?', '!' and everything else match.
* `Bm25Okapi.scores` repeats rank_bm25's arithmetic operation by operation in plain
  floats, so the scores are bit-identical.
"""

from __future__ import annotations

import math
import re
from functools import cache

# (pattern, replacement) rewrites, applied in order; the text is then split on whitespace.
_STARTING_QUOTES = [
    (r"([«“‘„]|[`]+)", r" \1 "),
    (r'^"', r"``"),
    (r"(``)", r" \1 "),
    (r"([ (\[{<])(\"|'{2})", r"\1 `` "),
    (r"(?i)(')(?!re|ve|ll|m|t|s|d|n)(\w)\b", r"\1 \2"),
]
_PUNCTUATION = [
    (r"([^.])(\.)([\])}>\"'»”’ ]*)\s*$", r"\1 \2 \3 "),
    (r"([:,])([^\d])", r" \1 \2"),
    (r"([:,])$", r" \1 "),
    (r"\.{2,}", r" \g<0> "),
    (r"[;@#$%&]", r" \g<0> "),
    (r"([^.])(\.)([\])}>\"']*)\s*$", r"\1 \2\3 "),
    (r"[?!]", r" \g<0> "),
    (r"([^'])' ", r"\1 ' "),
    (r"[*]", r" \g<0> "),
    (r"[\]\[(){}<>]", r" \g<0> "),
    (r"--", r" -- "),
]
_ENDING_QUOTES = [
    (r"([»”’])", r" \1 "),
    (r'"', " '' "),
    (r"(\S)('')", r"\1 \2 "),
    (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
]
_CONTRACTIONS = [
    (r"(?i)\b(can)(not)\b", r" \1 \2 "),
    (r"(?i)\b(d)('ye)\b", r" \1 \2 "),
    (r"(?i)\b(gim)(me)\b", r" \1 \2 "),
    (r"(?i)\b(gon)(na)\b", r" \1 \2 "),
    (r"(?i)\b(got)(ta)\b", r" \1 \2 "),
    (r"(?i)\b(lem)(me)\b", r" \1 \2 "),
    (r"(?i)\b(more)('n)\b", r" \1 \2 "),
    (r"(?i)\b(wan)(na)\s", r" \1 \2 "),
    (r"(?i) ('t)(is)\b", r" \1 \2 "),
    (r"(?i) ('t)(was)\b", r" \1 \2 "),
]


@cache
def _compiled() -> tuple[list, list]:
    """The rewrites before and after padding, compiled on first use: only a SearchEngine call needs
    them, and compiling all 31 at import was a visible part of every command's start."""
    def compiled(rules):
        return [(re.compile(pattern), replacement) for pattern, replacement in rules]

    return compiled(_STARTING_QUOTES + _PUNCTUATION), compiled(_ENDING_QUOTES + _CONTRACTIONS)


def word_tokens(text: str) -> list[str]:
    """NLTK 3.6.5's word tokens of one sentence (see the module note on sentences)."""
    before_padding, after_padding = _compiled()
    for pattern, replacement in before_padding:
        text = pattern.sub(replacement, text)
    text = f" {text} "
    for pattern, replacement in after_padding:
        text = pattern.sub(replacement, text)
    return text.split()


class Bm25Okapi:
    """Okapi BM25 over pre-tokenized documents (k1=1.5, b=0.75, idf floor 0.25 x mean idf)."""

    k1, b, epsilon = 1.5, 0.75, 0.25

    def __init__(self, documents) -> None:
        self.term_counts: list[dict[str, int]] = []
        self.lengths: list[int] = []
        containing: dict[str, int] = {}  # term -> number of documents containing it
        for document in documents:
            counts: dict[str, int] = {}
            for term in document:
                counts[term] = counts.get(term, 0) + 1
            self.term_counts.append(counts)
            self.lengths.append(len(document))
            for term in counts:
                containing[term] = containing.get(term, 0) + 1
        size = len(self.term_counts)
        self.mean_length = sum(self.lengths) / size
        # Terms in more than half of the documents get a small positive idf instead
        # of a negative one; the sums run in first-seen order, as rank_bm25's do.
        self.idf: dict[str, float] = {}
        total = 0.0
        for term, count in containing.items():
            self.idf[term] = math.log(size - count + 0.5) - math.log(count + 0.5)
            total += self.idf[term]
        floor = self.epsilon * (total / len(self.idf))
        for term, value in self.idf.items():
            if value < 0:
                self.idf[term] = floor

    def scores(self, query: list[str]) -> list[float]:
        """One score per document; each query token counts, repeats included."""
        scores = [0.0] * len(self.term_counts)
        for term in query:
            idf = self.idf.get(term) or 0
            for i, counts in enumerate(self.term_counts):
                freq = counts.get(term) or 0
                # Same operations, same order as rank_bm25's vectorised expression.
                norm = 1 - self.b + self.b * self.lengths[i] / self.mean_length
                scores[i] += idf * (freq * (self.k1 + 1) / (freq + self.k1 * norm))
        return scores
