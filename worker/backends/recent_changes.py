"""Writes not yet committed to the tantivy index, searchable at once.

A tantivy commit (a new segment, its files, a new searcher) costs ~6-12 ms
whatever its size; paying one per write on the job that follows was most of
the cost of an agent's turn. So a write is staged instead, here, in plain
Python (no tantivy writer is opened for it), where the next query finds it;
a later commit folds a batch of staged writes into the index
(``MemoryIndex.fold``: the deletes, the documents, one commit):
near-real-time search, as Lucene's NRT readers and Elasticsearch's refresh
interval do it.

Scores stay comparable: a staged memory is scored with tantivy's own BM25
(k1 1.2, b 0.75, its idf, and the document length as tantivy stores it,
quantized by its field-norm table) over the statistics of the index and the
staged memories together, so it ranks where it will rank once folded. A
memory deleted or rewritten since the last commit is hidden from the
index's hits (its staged copy, if any, stands in), and a namespace cleared
since then hides them all.

Nothing is lost by a crash: Redis holds the memories and the change log,
and the index's saved position is the last commit's, so a worker that
starts again stages the same changes anew.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

from ferret.records import Filters, Memory
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.tokens import tokenize

K1 = 1.2
B = 0.75


def _field_norms() -> list[int]:
    """tantivy's field-norm table (``fieldnorm/code.rs``): lengths up to 40 exactly, then eight
    values per doubling step, 256 in all. A length is stored as the largest value not above it."""
    table = list(range(41))
    step = 2
    while len(table) < 256:
        for _ in range(8):
            if len(table) == 256:
                break
            table.append(table[-1] + step)
        step *= 2
    return table


FIELD_NORMS = _field_norms()


def stored_length(length: int) -> int:
    """The document length tantivy's BM25 sees for ``length`` tokens."""
    return FIELD_NORMS[max(0, bisect_right(FIELD_NORMS, length) - 1)]


def bm25_idf(docs: int, doc_freq: int) -> float:
    """tantivy's BM25 idf of a term in ``doc_freq`` of ``docs`` documents."""
    return math.log(1 + (docs - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True)
class StagedDoc:
    memory: Memory  # what the fold adds to the index, and what filters are checked on
    terms: Counter[str]
    length: int  # tokens, before quantization (the average uses the true total)

    @classmethod
    def of(cls, memory: Memory) -> StagedDoc:
        tokens = tokenize(memory.text)
        return cls(memory, Counter(tokens), len(tokens))

    @property
    def id(self) -> str:
        return self.memory.id


@dataclass(frozen=True)
class Statistics:
    """What BM25 needs of the whole corpus (the index and the staged documents)."""

    docs: int
    average_length: float
    doc_freq: dict[str, int]

    def idf(self, token: str) -> float:
        df = self.doc_freq.get(token, 0)
        return bm25_idf(self.docs, df)


class RecentChanges:
    """One namespace's staged writes (see the module)."""

    def __init__(self) -> None:
        self.docs: dict[str, StagedDoc] = {}
        # term -> {id: times in the memory}: a search reads the postings of its terms, not every
        # staged memory, and a term's document frequency is the size of its postings
        self.postings: dict[str, dict[str, int]] = {}
        self.total_length = 0  # tokens of every staged memory
        self.hidden: set[str] = set()  # ids written since the last commit: a committed copy is stale
        self.stale = 0  # of those, how many the index holds (a search asks the index for that many more)
        self.cleared = False  # every committed document is stale
        self.changes = 0
        self.since: float | None = None  # monotonic time of the oldest staged change

    def __len__(self) -> int:
        return self.changes

    def _touch(self, count: int) -> None:
        self.changes += count
        if self.since is None:
            self.since = time.monotonic()

    def _remove(self, memory_id: str) -> None:
        doc = self.docs.pop(memory_id, None)
        if doc is None:
            return
        self.total_length -= doc.length
        for term in doc.terms:
            posting = self.postings[term]
            del posting[memory_id]
            if not posting:
                del self.postings[term]

    def upsert(self, memories: list[Memory]) -> None:
        for memory in memories:
            self._remove(memory.id)
            doc = self.docs[memory.id] = StagedDoc.of(memory)
            self.total_length += doc.length
            for term, times in doc.terms.items():
                self.postings.setdefault(term, {})[memory.id] = times
            self.hidden.add(memory.id)
        self._touch(len(memories))

    def delete(self, ids: list[str]) -> None:
        for memory_id in ids:
            self._remove(memory_id)
            self.hidden.add(memory_id)
        self._touch(len(ids))

    def clear(self) -> None:
        self.docs.clear()
        self.postings.clear()
        self.total_length = 0
        self.hidden.clear()
        self.stale = 0
        self.cleared = True
        self._touch(1)

    def doc_freq(self, token: str) -> int:
        """Staged memories holding ``token``."""
        return len(self.postings.get(token, ()))

    def hides(self, memory_id: str) -> bool:
        return self.cleared or memory_id in self.hidden

    def statistics(self, tokens: list[str], index_docs: int, index_average: float,
                   index_doc_freq: dict[str, int]) -> Statistics:
        """The corpus as tantivy's BM25 will see it once folded: the index's documents (deleted
        and rewritten ones count until a merge, as tantivy counts them) and the staged ones."""
        base_docs = 0 if self.cleared else index_docs
        docs = base_docs + len(self.docs)
        total = base_docs * index_average + self.total_length
        doc_freq = {token: (0 if self.cleared else index_doc_freq.get(token, 0)) + self.doc_freq(token)
                    for token in set(tokens)}
        return Statistics(docs, total / docs if docs else 0.0, doc_freq)

    def search(self, tokens: list[str], statistics: Statistics,
               filters: Filters | None) -> list[tuple[str, float]]:
        """Staged documents that match a query token and pass ``filters``, with tantivy's BM25 score."""
        found = []
        matching: dict[str, None] = {}
        for token in tokens:
            matching.update(dict.fromkeys(self.postings.get(token, ())))
        idf = {token: statistics.idf(token) for token in tokens}
        average = statistics.average_length or 1.0
        for memory_id in matching:
            doc = self.docs[memory_id]
            norm = K1 * (1 - B + B * stored_length(doc.length) / average)
            score = 0.0
            for token in tokens:  # a token twice in the query counts twice, as in the index's query
                tf = doc.terms.get(token, 0)
                if tf:
                    score += idf[token] * (K1 + 1) * tf / (tf + norm)
            if score > 0 and (filters is None or matches(doc.memory, filters)):  # the one filter rule
                found.append((doc.id, score))
        return found
