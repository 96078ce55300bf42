"""A memory index on tantivy: BM25 over Ferret's own tokens, updated in place.

Each memory is one tantivy document: its id, its tokens (Ferret's tokenizer,
joined by spaces and split again on whitespace, so the index sees exactly
the terms the query side makes), and its filter fields (type, subtype,
lifecycle upper case, cluster ids, event and ingestion times in microseconds).
A write of k memories is k deletes and adds and one commit: O(k), never a
rebuild. Filters are part of the query and score nothing.

Scores are made comparable from query to query, never max-normalised: a
document's BM25 score is divided by what a document containing every query
term once, at average length, would score (tantivy's BM25 carries the
``(k1 + 1)`` factor, so that is the term's ``idf``); terms the index has
never seen count at the highest IDF. The result is clipped to 1.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import tantivy

from ferret.records import Filters, Memory, TimeRange
from ferret.worker.backends.filtering import matches, parse_time
from ferret.worker.backends.recent_changes import RecentChanges, Statistics, bm25_idf
from ferret.worker.backends.tokens import tokenize

logger = logging.getLogger(__name__)

WRITER_HEAP_BYTES = 15_000_000  # tantivy's smallest writer budget
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


M_ARENA_MAX = -8  # glibc's mallopt parameter


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas for this process. tantivy's writer and merge
    threads each get an arena otherwise, and their freed memory stays in the
    process: measured, 200 namespaces indexed and their writers closed held
    333 MB of RSS with the default, 118 MB with two arenas. Call before the
    first index is made; a no-op off glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("tokens", tokenizer_name="whitespace", index_option="freq")
    for name in ("type", "subtype", "lifecycle", "cluster"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("event_us", indexed=True)
    builder.add_integer_field("created_us", indexed=True)
    return builder.build()


SCHEMA = _schema()


def micros(moment: datetime) -> int:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (aware - EPOCH) // MICROSECOND


def _document(memory: Memory) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_text("id", memory.id)
    doc.add_text("tokens", " ".join(tokenize(memory.text)))
    if memory.type:
        doc.add_text("type", memory.type)
    if memory.subtype:
        doc.add_text("subtype", memory.subtype)
    doc.add_text("lifecycle", (memory.state_lifecycle or "").upper())
    for cluster in memory.cluster_ids or ():
        doc.add_text("cluster", cluster)
    for field, raw in (("event_us", memory.temporal_event_time), ("created_us", memory.provenance_created_at)):
        moment = parse_time(raw)
        if moment is not None:
            doc.add_integer(field, micros(moment))
    return doc


def _term(field: str, value: str) -> tantivy.Query:
    return tantivy.Query.term_query(SCHEMA, field, value)


def _in_range(field: str, time_range: TimeRange) -> tantivy.Query:
    low = micros(time_range.start) if time_range.start else -(2**63)
    high = micros(time_range.end) if time_range.end else 2**63 - 1
    return tantivy.Query.range_query(SCHEMA, field, tantivy.FieldType.Integer, low, high)


def _filtered(query: tantivy.Query, filters: Filters | None) -> tantivy.Query:
    """``query`` restricted to the documents that pass ``filters``."""
    only = filter_query(filters) if filters is not None else None
    if only is None:
        return query
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)])


def filter_query(filters: Filters) -> tantivy.Query | None:
    """The filters as one query that scores nothing; None when nothing is filtered."""
    must: list[tantivy.Query] = []
    if filters.type:
        must.append(_term("type", filters.type))
    if filters.subtype:
        must.append(_term("subtype", filters.subtype))
    if filters.lifecycle:
        must.append(_term("lifecycle", filters.lifecycle.upper()))
    if filters.cluster_ids:
        must.append(tantivy.Query.term_set_query(SCHEMA, "cluster", list(filters.cluster_ids)))
    if filters.time_range:
        fields = {"event": ("event_us",), "ingestion": ("created_us",)}.get(filters.time_range.type,
                                                                          ("event_us", "created_us"))
        must.append(tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, _in_range(field, filters.time_range)) for field in fields]))
    if not must:
        return None
    return tantivy.Query.const_score_query(
        tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in must]), 0.0)


class MemoryIndex:
    """One namespace's index: in RAM (``path=None``) or in a directory."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        if path is not None and tantivy.Index.exists(path):
            self._index = tantivy.Index.open(path)
        else:
            self._index = tantivy.Index(SCHEMA, path=path)
        self._index.config_reader("Manual", 0)
        self._writer: Any = None
        self._searcher = self._index.searcher()
        self.recent = RecentChanges()  # staged writes: searchable, not yet committed (``stage``, ``fold``)
        self._corpus_figures: tuple[int, float] | None = None  # (documents, average length), per searcher

    def _writing(self) -> Any:
        if self._writer is None:
            self._writer = self._index.writer(WRITER_HEAP_BYTES, 1)
        return self._writer

    def apply(self, upserts: Iterable[Memory] = (), deletes: Iterable[str] = (), clear: bool = False,
              commit: bool = True, fresh: bool = False) -> int:
        """Delete and (re)add memories (after deleting all, with ``clear``), then
        commit: searchable when this returns. ``commit=False`` batches writes
        for a later ``commit()``; ``fresh``: the memories are not in the index
        yet (a build), so no delete is queued for them (tantivy holds every
        queued delete until the commit)."""
        writer = self._writing()
        changed = 0
        try:
            if clear:
                writer.delete_all_documents()
            for memory_id in deletes:
                writer.delete_documents("id", memory_id)
                changed += 1
            for memory in upserts:
                if not fresh:
                    writer.delete_documents("id", memory.id)
                writer.add_document(_document(memory))
                changed += 1
            if commit:
                self.commit()
        except Exception:
            self._writer = None  # an IO error kills tantivy's writer for good: the next write opens another
            raise
        return changed

    def stage(self, upserts: Sequence[Memory] = (), deletes: Sequence[str] = (), clear: bool = False) -> int:
        """A write searchable at once without a commit (``ferret.worker.backends.recent_changes``), held
        in memory only (no writer is opened); ``fold`` commits what is staged."""
        recent = self.recent
        if clear:
            recent.clear()
        for memory_id in {*deletes, *(m.id for m in upserts)} - recent.hidden:
            recent.stale += int(self._searcher.doc_freq("id", memory_id) > 0)  # the index holds a copy to hide
        recent.delete(list(deletes))
        recent.upsert(list(upserts))
        return len(deletes) + len(upserts)

    def fold(self) -> int:
        """Commit the staged writes into the index (the clear, the deletes and rewrites, the
        documents: one commit), then close the writer; how many changes that was."""
        recent = self.recent
        staged = len(recent)
        if staged:
            self.apply(upserts=[doc.memory for doc in recent.docs.values()],
                       deletes=[memory_id for memory_id in recent.hidden if memory_id not in recent.docs],
                       clear=recent.cleared)
            self.release_writer()
        return staged

    def commit(self) -> None:
        self._writing().commit()
        self._index.reload()
        self._searcher = self._index.searcher()
        self.recent = RecentChanges()
        self._corpus_figures = None

    def close(self) -> None:
        """Release the writer and the index (its files stay where they are)."""
        self.release_writer()

    @property
    def writing(self) -> bool:
        """True while a writer is open (it holds memory until released)."""
        return self._writer is not None

    def release_writer(self) -> None:
        """Close the writer (it holds memory); the next write opens another."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.wait_merging_threads()
            except ValueError as exc:  # a writer an IO error killed: nothing left to merge
                logger.warning("index %s: its writer ended with an error (%s)", self.path, exc)

    def __len__(self) -> int:
        return int(self._searcher.num_docs)

    def _idf(self, token: str) -> float:
        return bm25_idf(self._searcher.num_docs, self._searcher.doc_freq("tokens", token))

    def _corpus(self, tokens: list[str]) -> tuple[int, float] | None:
        """The committed index's document count and average length as tantivy's BM25 takes them
        (deleted documents count until a merge), read from its explanation of one hit, once per
        searcher; None when no query token is in the index."""
        if self._corpus_figures is None:
            for token in dict.fromkeys(tokens):
                if self._searcher.doc_freq("tokens", token):
                    term = _term("tokens", token)
                    hits = self._searcher.search(term, 1, count=False).hits
                    if hits:
                        figures = _explained(term.explain(self._searcher, hits[0][1]).to_json())
                        if figures.docs is not None and figures.average is not None:
                            self._corpus_figures = (int(figures.docs), figures.average)
                        break
        return self._corpus_figures

    def search(self, query: str, limit: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        """Top ``limit`` (id, score) pairs with score > 0 that pass ``filters``: the committed index's
        hits (those staged writes made stale left out) and the staged documents', on one scale."""
        return self.search_tokens(tokenize(query), limit, filters)

    def ids_beginning_with(self, stems: Sequence[str], limit: int, filters: Filters | None = None) -> list[str]:
        """Up to ``limit`` memories holding a word that begins with one of ``stems`` (tokens as
        ``tokenize`` makes them), in no particular order: committed ones (prefix term queries) and
        staged ones."""
        recent = self.recent
        ids: dict[str, None] = {}
        if stems and not recent.cleared and len(self):
            prefixes = _filtered(tantivy.Query.boolean_query([
                (tantivy.Occur.Should, tantivy.Query.fuzzy_term_query(SCHEMA, "tokens", stem, distance=0,
                                                                      prefix=True)) for stem in stems]), filters)
            for _, address in self._searcher.search(prefixes, limit + recent.stale, count=False).hits:
                memory_id = self._searcher.doc(address)["id"][0]
                if not recent.hides(memory_id):
                    ids[memory_id] = None
        for doc in recent.docs.values():
            if any(term.startswith(stem) for term in doc.terms for stem in stems) and (
                    filters is None or matches(doc.memory, filters)):
                ids[doc.id] = None
        return list(ids)[:limit]

    def search_tokens(self, tokens: list[str], limit: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        """``search`` for tokens already made by ``tokenize``."""
        recent = self.recent
        if not tokens or limit <= 0 or (len(self) == 0 and not recent.docs):
            return []
        if not len(recent):
            found = self._committed_hits(tokens, limit, filters)
            return self._scaled(found, sum(self._idf(t) for t in tokens), limit)
        corpus = self._corpus(tokens)
        docs, average = corpus if corpus is not None else (0, 0.0)
        index_doc_freq = {t: int(self._searcher.doc_freq("tokens", t)) for t in set(tokens)}
        staged_average = recent.total_length / len(recent.docs) if recent.docs else 1.0
        statistics = recent.statistics(tokens, docs, average if docs else staged_average, index_doc_freq)
        pairs = [] if recent.cleared else [
            (memory_id, score) for memory_id, score in self._committed_hits(
                tokens, limit + recent.stale, filters, self._idf_boosts(statistics, index_doc_freq, docs))
            if not recent.hides(memory_id)]
        pairs += recent.search(tokens, statistics, filters)
        return self._scaled(pairs, sum(statistics.idf(t) for t in tokens), limit)

    def _idf_boosts(self, statistics: Statistics, index_doc_freq: dict[str, int], docs: int) -> dict[str, float]:
        """For each query term the staged memories hold (its document frequency moves once they are
        folded in), the factor that brings its idf in the index's BM25 to the idf it will have:
        the committed hits are searched with each such term boosted by it, so they score and rank
        as they will once the staged memories are folded in."""
        boosts = {}
        for token, df in index_doc_freq.items():
            if df == 0 or docs <= 0 or not self.recent.doc_freq(token):
                continue
            now = bm25_idf(docs, df)
            if now > 0:
                boosts[token] = statistics.idf(token) / now
        return boosts

    @staticmethod
    def _text_query(tokens: list[str], boosts: dict[str, float] | None = None) -> tantivy.Query:
        boosts = boosts or {}
        terms = [tantivy.Query.boost_query(_term("tokens", t), boosts[t]) if t in boosts else _term("tokens", t)
                 for t in tokens]
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in terms])

    def _committed_hits(self, tokens: list[str], limit: int, filters: Filters | None,
                        boosts: dict[str, float] | None = None) -> list[tuple[str, float]]:
        text = _filtered(self._text_query(tokens, boosts), filters)
        pairs = []
        seen: set[str] = set()
        for score, address in self._searcher.search(text, limit, count=False).hits:
            memory_id = self._searcher.doc(address)["id"][0]
            if score <= 0 or memory_id in seen:  # (a build's scan may meet a memory twice)
                continue
            seen.add(memory_id)
            pairs.append((memory_id, score))
        return pairs

    @staticmethod
    def _scaled(pairs: list[tuple[str, float]], scale: float, limit: int) -> list[tuple[str, float]]:
        scaled = [(memory_id, round(min(1.0, score / scale), 6)) for memory_id, score in pairs]
        return sorted(scaled, key=lambda p: (-p[1], p[0]))[:limit]  # ties by id: the same order either way


@dataclasses.dataclass
class _Explained:
    docs: float | None = None
    average: float | None = None
    terms: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # token -> (freq, stored length)


_TERM = re.compile(r'Term=Term\(field=\d+, type=Str, "(.*)"\)$')


def _explained(explanation: str) -> _Explained:
    """What tantivy's explanation of a BM25 score (JSON) says: N, avgdl, and per term freq and dl."""
    found = _Explained()

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        description = str(node.get("description", ""))
        if description.startswith("TermQuery"):
            values: dict[str, Any] = {}
            stack = list(node.get("details") or ())
            while stack:
                child = stack.pop()
                if isinstance(child, dict):
                    values[str(child.get("description", "")).split(",")[0]] = child.get("value")
                    stack.extend(child.get("details") or ())
            match = next((_TERM.match(str(c)) for c in node.get("context") or () if _TERM.match(str(c))), None)
            if match and values.get("freq") is not None and values.get("dl") is not None:
                found.terms[json.loads(f'"{match.group(1)}"')] = (float(values["freq"]), float(values["dl"]))
            if values.get("N") is not None:
                found.docs = float(values["N"])
            if values.get("avgdl") is not None:
                found.average = float(values["avgdl"])
            return
        for child in node.get("details") or ():
            walk(child)

    walk(json.loads(explanation))
    return found
