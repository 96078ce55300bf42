"""One more try for a search that found nothing: the words of the index that
begin with the query's words (after stemming). "fly" finds nothing in notes
that only say "flights"; "fli" begins "flight". The family's words are read
from the memories that hold them, then searched as any query is (BM25 on
one scale with every other search); only a search that came back empty pays
for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ferret.records import Filters, Memory
from ferret.worker.backends.tokens import tokenize

if TYPE_CHECKING:
    from ferret.worker.backends.tantivy_index import MemoryIndex

MIN_STEM = 3  # shorter words begin too many others
FAMILY_MEMORIES = 50  # memories read to find the family's words
MAX_FAMILY_WORDS = 24


def family_words(stems: Sequence[str], memories: Mapping[str, Memory]) -> list[str]:
    """Words of ``memories`` that begin with one of ``stems`` and are longer, most frequent first."""
    counts: dict[str, int] = {}
    for memory in memories.values():
        for word in set(tokenize(memory.text)):
            if any(word != stem and word.startswith(stem) for stem in stems):
                counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))[:MAX_FAMILY_WORDS]


def word_family_search(index: MemoryIndex, read: Callable[[list[str]], Mapping[str, Memory]], query: str,
                       limit: int, filters: Filters) -> list[tuple[str, float]]:
    """(id, score) pairs for the words that begin with the query's words, as ``MemoryIndex.search``
    gives them; none when there are no such words."""
    stems = [token for token in dict.fromkeys(tokenize(query)) if len(token) >= MIN_STEM]
    holders = index.ids_beginning_with(stems, FAMILY_MEMORIES, filters)
    words = family_words(stems, read(holders)) if holders else []
    return index.search_tokens(words, limit, filters) if words else []
