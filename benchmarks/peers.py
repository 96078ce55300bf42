"""The retrievers a user would pick instead of Ferret, run through their own libraries on the same memories and
questions (``ferret bench peers``), and what only they find.

Peers, each at its library's defaults but for k = 10:
- ``llamaindex_bm25``: LlamaIndex's ``BM25Retriever`` (bm25s, English stemming and stop words);
- ``sentence_model``: the sentence model alone (all-MiniLM-L6-v2, cosine), through LlamaIndex's
  ``VectorStoreIndex``;
- ``llamaindex_fusion``: LlamaIndex's ``QueryFusionRetriever`` over both, reciprocal-rank fusion, one query (no LLM);
- ``langchain_ensemble``: LangChain's ``EnsembleRetriever`` over its ``BM25Retriever`` (rank_bm25, whitespace
  words) and an in-memory vector store of the same model, weights 0.5 / 0.5.

Both frameworks embed with the embedder Ferret's semantic retriever uses (one cache), so a difference is the
retrieval, not the vectors. The libraries are not Ferret's dependencies: ``pip install
llama-index-retrievers-bm25 langchain-community langchain-classic`` (in a virtual environment of its own: the
BM25 package pins PyStemmer below 3).

A question is *peer-only* when some peer's top 10 holds a piece of its evidence that Ferret's top 10 (as
shipped) does not; such a question is *recovered* by a Ferret variant whose top 10 holds that piece.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmarks.embedding_cache import CachedEmbedder
from ferret.bench.locomo import Dataset, Question
from ferret.records import Memory
from ferret.settings import PipelineSettings
from ferret.worker.semantic.embedders import Embedder

K = 10
Peer = Callable[[str], list[str]]  # a question -> the ids of its top K, best first


def peer_libraries_missing() -> list[str]:
    """The peers' packages that are not installed (empty: all are)."""
    import importlib.util
    wanted = {"llama_index.retrievers.bm25": "llama-index-retrievers-bm25",
              "langchain_community": "langchain-community", "langchain_classic": "langchain-classic",
              "rank_bm25": "rank-bm25"}
    missing = []
    for module, package in wanted.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(package)
    return missing


def _llama_embedding(embedder: Embedder) -> Any:
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class Adapter(BaseEmbedding):  # type: ignore[misc]
        _inner: Any = PrivateAttr()

        def __init__(self, inner: Embedder) -> None:
            super().__init__(model_name=inner.name, embed_batch_size=256)
            self._inner = inner

        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in self._inner.embed([query])[0]]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_query_embedding(text)

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in self._inner.embed(texts)]
    return Adapter(embedder)


def _langchain_embeddings(embedder: Embedder) -> Any:
    from langchain_core.embeddings import Embeddings

    class Adapter(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in embedder.embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return [float(x) for x in embedder.embed([text])[0]]
    return Adapter()


def build_peers(memories: Sequence[Memory], embedder: Embedder) -> dict[str, Peer]:
    """Every peer over one conversation's memories."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever as LangChainBM25
    from langchain_core.vectorstores import InMemoryVectorStore
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LlamaBM25

    nodes = [TextNode(text=m.text, id_=m.id) for m in memories]
    bm25 = LlamaBM25.from_defaults(nodes=nodes, similarity_top_k=K)
    vector = VectorStoreIndex(nodes, embed_model=_llama_embedding(embedder)).as_retriever(similarity_top_k=K)
    fusion = QueryFusionRetriever([vector, bm25], similarity_top_k=K, num_queries=1, mode=FUSION_MODES.RECIPROCAL_RANK,
                                  use_async=False, llm=MockLLM())
    texts, ids = [m.text for m in memories], [{"id": m.id} for m in memories]
    chain_bm25 = LangChainBM25.from_texts(texts, metadatas=ids, k=K)
    store = InMemoryVectorStore(_langchain_embeddings(embedder))
    store.add_texts(texts, metadatas=ids)
    ensemble = EnsembleRetriever(retrievers=[chain_bm25, store.as_retriever(search_kwargs={"k": K})],
                                 weights=[0.5, 0.5])

    def llama(retriever: Any) -> Peer:
        return lambda question: [n.node.node_id for n in retriever.retrieve(question)][:K]
    return {"llamaindex_bm25": llama(bm25), "sentence_model": llama(vector), "llamaindex_fusion": llama(fusion),
            "langchain_ensemble": lambda question: [d.metadata["id"] for d in ensemble.invoke(question)][:K]}


def peer_answers(dataset: Dataset, embedder: Embedder) -> dict[str, list[list[str]]]:
    """Each peer's top K for every question, in the dataset's order."""
    peers = {name: build_peers(memories, embedder) for name, memories in dataset.memories.items()}
    names = next(iter(peers.values())).keys()
    return {name: [peers[q.conversation][name](q.text) for q in dataset.questions] for name in names}


def _found(ids: Sequence[str], question: Question) -> set[str]:
    return set(ids[:K]) & question.evidence


def peer_only(questions: Sequence[Question], ferret: Sequence[Sequence[str]],
              peers: Mapping[str, Sequence[Sequence[str]]]) -> dict[int, set[str]]:
    """Question index -> the evidence some peer's top K holds and Ferret's does not (only where there is some)."""
    missed: dict[int, set[str]] = {}
    for i, question in enumerate(questions):
        mine = _found(ferret[i], question)
        theirs = set().union(*(_found(answers[i], question) for answers in peers.values())) - mine
        if theirs:
            missed[i] = theirs
    return missed


def kind(i: int, question: Question, missed: set[str], peers: Mapping[str, Sequence[Sequence[str]]]) -> str:
    """``words`` when the BM25 peer alone found the missed evidence too (shared words, told apart by its
    stemming or tokenizing), else ``meaning`` (only peers with the sentence model found it)."""
    return "words" if missed & _found(peers["llamaindex_bm25"][i], question) else "meaning"


def recovered(missed: Mapping[int, set[str]], answers: Sequence[Sequence[str]]) -> int:
    """Peer-only questions whose missed evidence a variant's top K now holds (any piece of it)."""
    return sum(1 for i, evidence in missed.items() if evidence & set(answers[i][:K]))


def recall_at_k(questions: Sequence[Question], answers: Sequence[Sequence[str]]) -> float:
    return statistics.fmean(len(_found(a, q)) / len(q.evidence) for a, q in zip(answers, questions, strict=True))


def timed(run: Callable[[Question], Sequence[str]], questions: Sequence[Question]) -> tuple[
        list[list[str]], float]:
    """Each question's answer and the median seconds a question took."""
    answers, seconds = [], []
    for question in questions:
        start = time.perf_counter()
        answers.append(list(run(question)))
        seconds.append(time.perf_counter() - start)
    return answers, statistics.median(seconds)


class QueriesUncached:
    """Memories' embeddings from the cache (embedded once, when the backends are built); a question's, or any
    other text's, from the embedder itself each time, as a job pays for it."""

    def __init__(self, cached: CachedEmbedder, inner: Embedder, questions: frozenset[str]) -> None:
        self.cached, self.inner, self.name, self.questions = cached, inner, inner.name, questions

    def embed(self, texts: Sequence[str], timeout: float | None = None) -> Any:
        if any(text in self.questions or not self.cached.knows(text) for text in texts):
            return self.inner.embed(texts, timeout)
        return self.cached.embed(texts, timeout)


def variants(base: PipelineSettings) -> dict[str, tuple[bool, PipelineSettings]]:
    """Ferret's rows: name -> (with the semantic retriever, settings). Fixed values, none chosen on the data:
    as shipped; the semantic retriever with the shipped fusion (weighted, 0.2 of the text weight); and with
    the peers' own fusion (reciprocal rank, the text weight split evenly between words and meaning)."""
    def fusion(**changes: Any) -> PipelineSettings:
        return base.model_copy(update={"fusion": base.fusion.model_copy(update=changes)})
    return {"ferret": (False, base),
            "ferret_semantic_weighted": (True, fusion(method="weighted", semantic_share=0.2)),
            "ferret_semantic_rrf_even": (True, fusion(method="rrf", semantic_share=0.5))}


def _ferret(backends: Mapping[str, Any], settings: PipelineSettings) -> Callable[[Question], list[str]]:
    from ferret.worker.pipeline.orchestrator import run_pipeline
    return lambda question: [h.id for h in run_pipeline(question.text, backends[question.conversation],
                                                         settings).hits]


def evaluate(dataset: Dataset, base: PipelineSettings, cached: CachedEmbedder, inner: Embedder) -> dict[str, Any]:
    """The peers, Ferret's rows, the peer-only questions (by kind) and how many each row recovers, with the
    median time a question takes (its embedding included where the row embeds)."""
    from ferret.worker.backends.memory import InMemoryBackend

    questions = dataset.questions
    peers = peer_answers(dataset, cached)
    uncached = QueriesUncached(cached, inner, frozenset(q.text for q in questions))
    plain = {name: InMemoryBackend(m) for name, m in dataset.memories.items()}
    dense = {name: InMemoryBackend(m, embedder=uncached) for name, m in dataset.memories.items()}
    rows: dict[str, dict[str, Any]] = {}
    answers: dict[str, list[list[str]]] = {}
    for name, (semantic, settings) in variants(base).items():
        backends = dense if semantic else plain
        answers[name], median = timed(_ferret(backends, settings), questions)
        rows[name] = {"recall@10": round(recall_at_k(questions, answers[name]), 4),
                      "median_ms": round(median * 1000, 3), "semantic": semantic}
    missed = peer_only(questions, answers["ferret"], peers)
    kinds = {i: kind(i, questions[i], evidence, peers) for i, evidence in missed.items()}
    for name, row in rows.items():
        row["recovered"] = recovered(missed, answers[name])
        row["recovered_by_kind"] = {k: recovered({i: e for i, e in missed.items() if kinds[i] == k}, answers[name])
                                    for k in ("meaning", "words")}
    return {"questions": len(questions), "embedder": inner.name,
            "peers": {name: {"recall@10": round(recall_at_k(questions, a), 4)} for name, a in peers.items()},
            "ferret": rows, "peer_only": len(missed),
            "peer_only_by_kind": {k: sum(1 for v in kinds.values() if v == k) for k in ("meaning", "words")},
            "peer_only_questions": [{"text": questions[i].text, "conversation": questions[i].conversation,
                                     "kind": kinds[i], "recovered_by": [n for n in rows
                                                                        if evidence & set(answers[n][i][:K])]}
                                    for i, evidence in missed.items()]}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"{report['questions']} single questions; the peers' top {K} and Ferret's, embedder "
             f"{report['embedder']}.", "", "| retriever | R@10 |", "|---|---|"]
    lines += [f"| {name} | {row['recall@10']:.3f} |" for name, row in report["peers"].items()]
    by_kind = report["peer_only_by_kind"]
    lines += ["", f"Peer-only questions (evidence in some peer's top {K}, not in Ferret's as shipped): "
              f"{report['peer_only']} ({by_kind['meaning']} found only with the sentence model, "
              f"{by_kind['words']} by the BM25 peer too).", "",
              "| Ferret | R@10 | peer-only recovered | of them, meaning / words | median ms a question |",
              "|---|---|---|---|---|"]
    total = report["peer_only"] or 1
    for name, row in report["ferret"].items():
        kinds = row["recovered_by_kind"]
        lines.append(f"| {name} | {row['recall@10']:.3f} | {row['recovered']} ({row['recovered'] / total:.0%}) | "
                     f"{kinds['meaning']} / {kinds['words']} | {row['median_ms']:.2f} |")
    return "\n".join(lines)
