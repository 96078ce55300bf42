"""An in-memory BM25 index over memories (bm25s, Snowball stemming, stopwords).

Scores are made comparable from query to query, never max-normalised: a
document's BM25 score is divided by what a document containing every query
term once, at average length, would score (bm25s's Lucene variant gives such
a term ``idf / (1 + k1)``). Terms the corpus has never seen count at the highest IDF (they are
part of the question and nothing matches them). The result is clipped to 1.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from ferret.records import Hit, Memory
from ferret.text import AUXILIARIES, EN_QUESTION_WORD_SET, PERFECT, PRONOUNS, TOKEN

logging.getLogger("bm25s").setLevel(logging.WARNING)

_STOPWORDS = frozenset(STOPWORDS_EN) | EN_QUESTION_WORD_SET | AUXILIARIES | PRONOUNS | PERFECT | frozenset(
    "about from with".split())
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def tokenize(text: str) -> list[str]:
    words = [w for w in TOKEN.findall(text.lower()) if w not in _STOPWORDS]
    return _stemmer().stemWords(words) if words else []


class LexicalIndex:
    """BM25 over a fixed list of memories; rebuild to change it."""

    def __init__(self, memories: Sequence[Memory]) -> None:
        self.memories = list(memories)
        corpus = [tokenize(m.text) for m in self.memories]
        self._size = len(corpus)
        self._df: Counter[str] = Counter()
        for tokens in corpus:
            self._df.update(set(tokens))
        self._bm25: bm25s.BM25 | None = None
        if self._size:
            self._bm25 = bm25s.BM25()
            self._bm25.index([t or [""] for t in corpus], show_progress=False)

    def __len__(self) -> int:
        return self._size

    def _idf(self, token: str) -> float:
        df = self._df.get(token, 0)
        return math.log(1 + (self._size - df + 0.5) / (df + 0.5))

    def search(
        self, query: str, limit: int, keep: Callable[[Memory], bool] | None = None
    ) -> list[Hit]:
        """Top ``limit`` hits with score > 0 among memories ``keep`` accepts."""
        tokens = tokenize(query)
        if not tokens or self._bm25 is None or limit <= 0:
            return []
        scale = sum(self._idf(t) for t in tokens) / (1 + self._bm25.k1)
        scores = self._bm25.get_scores(tokens) / scale
        order = np.flatnonzero(scores > 0)
        order = order[np.argsort(-scores[order], kind="stable")]
        hits: list[Hit] = []
        for position in order:
            memory = self.memories[position]
            if keep is not None and not keep(memory):
                continue
            hits.append(Hit.of(memory, round(min(1.0, float(scores[position])), 6)))
            if len(hits) >= limit:
                break
        return hits
