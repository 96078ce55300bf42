"""An in-process backend over a list of memories: the fake for unit tests,
the engine of the fake Nous server, and the baseline in benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ferret.records import Filters, Hit, Memory
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.linking import linked_hits, neighbour_scores
from ferret.worker.backends.tantivy_index import MemoryIndex
from ferret.worker.backends.word_family import word_family_search
from ferret.worker.semantic.embedders import Embedder
from ferret.worker.semantic.vectors import VectorIndex


class Links(Protocol):
    def weights(self, ids: Sequence[str]) -> Mapping[str, Mapping[str, float]]: ...


class InMemoryBackend:
    name = "memory"
    widens = True

    def __init__(self, memories: Iterable[Memory] = (), delay_seconds: float = 0.0,
                 links: Links | None = None, embedder: Embedder | None = None,
                 vectors: VectorIndex | None = None) -> None:
        """``links``: memory links (co-retrieval weights, say) for the graph retriever;
        ``embedder``: the semantic retriever's, which embeds every memory written
        (``vectors``: their embeddings, already computed)."""
        self.links = links
        self.embedder = embedder
        self.retrievers: tuple[str, ...] = ("lexical", *(("graph",) if links is not None else ()),
                                            *(("semantic",) if embedder is not None else ()))
        self._memories = {m.id: m for m in memories}
        self._index = MemoryIndex()
        self._index.apply(upserts=self._memories.values())
        self._vectors = vectors if vectors is not None else VectorIndex()
        if embedder is not None and vectors is None:
            self._embed(list(self._memories.values()))
        self.delay_seconds = delay_seconds
        self.calls = 0

    def _embed(self, memories: list[Memory]) -> None:
        if self.embedder is not None and memories:
            self._vectors.upsert([m.id for m in memories], self.embedder.embed([m.text for m in memories]))

    def upsert(self, memories: Iterable[Memory]) -> None:
        batch = {m.id: m for m in memories}
        self._memories.update(batch)
        self._index.apply(upserts=batch.values())
        self._embed(list(batch.values()))

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for memory_id in ids:
            self._memories.pop(memory_id, None)
        self._index.apply(deletes=ids)
        self._vectors.delete(ids)

    def search(
        self, query: str, limit: int, filters: Filters, timeout: float | None = None
    ) -> list[Hit]:
        self.calls += 1
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        return self._hits(self._index.search(query, limit, filters))

    def widened(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        return self._hits(word_family_search(self._index, self._held, query, limit, filters))

    def _held(self, ids: Iterable[str]) -> dict[str, Memory]:
        return {i: self._memories[i] for i in ids if i in self._memories}

    def _hits(self, pairs: list[tuple[str, float]]) -> list[Hit]:
        return [Hit.of(self._memories[memory_id], score) for memory_id, score in pairs]

    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters,
               timeout: float | None = None) -> list[Hit]:
        if self.links is None or not seeds:
            return []
        scores = neighbour_scores(seeds, self.links.weights([s.id for s in seeds]))
        return linked_hits(scores, limit, filters, self._held)

    def similar(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        if self.embedder is None:
            return []
        vector = self.embedder.embed([query], timeout)
        found = self._vectors.nearest(vector, limit, lambda i: i in self._memories
                                      and matches(self._memories[i], filters))
        return [Hit.of(self._memories[i], score) for i, score in found]

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None
