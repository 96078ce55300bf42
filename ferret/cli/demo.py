"""``ferret demo``: the whole service on embedded defaults, then gone.

Starts a private redis-server, loads a sample corpus that ships with Ferret
(a trading agent's memories, or with ``--sample everyday`` 30 cooking and
travel notes), starts two workers, sends a mix of prefetch and batch
jobs (simple and compound), prints what came back, and stops everything it
started.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from importlib import resources
from typing import TYPE_CHECKING

import click

from ferret.cli import exit_codes
from ferret.cli.options import settings_of

if TYPE_CHECKING:
    from ferret.contract import RetrievalResult
    from ferret.producer.client import JobHandle, Producer

NAMESPACE = "demo"
TRADING_JOBS = (
    ("prefetch", "What's my BTC thesis and how did my last SOL trade go?"),
    ("prefetch", "what signals are firing right now?"),
    ("prefetch", "BTC and SOL analysis"),
    ("prefetch", "funding squeeze playbook"),
    ("prefetch", "What lessons did I learn about stops? Also, which breakouts did I miss?"),
    ("batch", "How do I trade a breakout retest?"),
    ("batch", "What happened when the Fed held rates"),
    ("batch", "ETH thesis as well as the DOGE pump"),
    ("batch", "risk limits for open positions"),
    ("batch", "What's the plan for tomorrow's coffee with Anna about ETH?"),
)
EVERYDAY_JOBS = (
    ("prefetch", "When do I fly and what class did I book?"),
    ("prefetch", "What wine does Anna prefer?"),
    ("prefetch", "How do I make the risotto?"),
    ("prefetch", "What do I need to do before the Rome trip?"),
    ("prefetch", "Anything vegetarian I can cook for Marco? Also, is Anna allergic to anything?"),
    ("batch", "What happened at Anna's dinner party?"),
    ("batch", "Quelle est la recette de la focaccia ?"),
    ("batch", "¿Qué receta de paella tengo?"),
    ("batch", "Why did the focaccia burn?"),
    ("batch", "Porto and Rome restaurants"),
)
SAMPLES = {"trading": ("sample_memories.jsonl", "sample trading memories", TRADING_JOBS),
           "everyday": ("everyday_memories.jsonl", "cooking and travel notes", EVERYDAY_JOBS)}


def _start_workers(url: str, ports: list[int]) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "FERRET_REDIS__URL": url}
    return [
        subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q", "--metrics-port", str(port)],
                         env=env, stdout=subprocess.DEVNULL)
        for port in ports
    ]


def _scrape(ports: list[int]) -> dict[str, float]:
    """Counters summed over the workers' /metrics endpoints."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for port in ports:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def _await_workers(client, processes: list[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Wait until every worker has registered, so timings exclude start-up; a worker that exits first ends
    the demo (its own error is above, on standard error)."""
    from ferret.rq_layer.producer_side import workers_up

    deadline = time.monotonic() + timeout
    while workers_up(client) < len(processes) and time.monotonic() < deadline:
        if (ended := next((p for p in processes if p.poll() is not None), None)) is not None:
            raise click.ClickException(f"a worker exited with status {ended.returncode} before it started "
                                       "(its error is above)")
        time.sleep(0.05)


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for process in workers:
        process.terminate()
    for process in workers:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@click.command()
@click.option("--workers", default=2, show_default=True, help="Worker processes to start.")
@click.option("--sample", type=click.Choice(sorted(SAMPLES)), default="trading", show_default=True,
              help="The corpus: a trading agent's memories, or 30 cooking and travel notes "
                   "(events, recipes, preferences, facts, reminders, procedures).")
@click.pass_context
def demo(ctx: click.Context, workers: int, sample: str) -> None:
    """Run the whole service on embedded defaults and show what it does."""
    from ferret.ingest import parse_memory_lines
    from ferret.producer.client import Producer
    from ferret.redis_plumbing.embedded_redis import EmbeddedRedis
    from ferret.redis_plumbing.redis_conn import client_for
    from ferret.redis_plumbing.server_process import loopback_port
    from ferret.worker.backends.local import MemoryStore

    settings = settings_of(ctx)
    corpus_file, corpus_name, jobs = SAMPLES[sample]
    corpus = resources.files("ferret.data").joinpath(corpus_file).read_text()
    with tempfile.TemporaryDirectory(prefix="ferret-demo-") as home:
        server = EmbeddedRedis(home).start()
        processes: list[subprocess.Popen[bytes]] = []
        results: list[RetrievalResult | None] = []
        try:
            client = client_for(server.url)
            memories, _ = parse_memory_lines(corpus.splitlines())
            MemoryStore(client, NAMESPACE).upsert(memories)
            click.echo(f"redis: embedded at {server.url}; loaded {len(memories)} {corpus_name}")
            ports = [loopback_port() for _ in range(workers)]
            processes = _start_workers(server.url, ports)
            _await_workers(client, processes)
            producer = Producer(client, settings)
            started = time.monotonic()
            handles = [producer.enqueue({"query": q, "namespace": NAMESPACE, "queue": queue})
                       for queue, q in jobs]
            click.echo(f"sent {len(handles)} jobs to {workers} workers\n")
            results = [_answer(producer, h) for h in handles]
            elapsed = time.monotonic() - started
            _show(producer, jobs, results, elapsed)
            time.sleep(0.2)  # workers record metrics right after writing each result
            _show_metrics(ports, [r for r in results if r is not None])
        finally:
            _stop(processes)
            server.stop()
    click.echo("\nstopped the workers and the embedded Redis.")
    if any(r is None for r in results):
        ctx.exit(exit_codes.NOT_YET)


def _show_metrics(ports: list[int], results) -> None:
    totals = _scrape(ports)
    stats = [r.stats for r in results]
    rows = (
        ("ferret_jobs_total", float(len(results))),
        ("ferret_retries_total", float(sum(s.retries or 0 for s in stats))),
        ("ferret_replacements_attempted_total", float(sum(s.replacements_attempted or 0 for s in stats))),
        ("ferret_replacements_successful_total", float(sum(s.replacements_successful or 0 for s in stats))),
        ("ferret_decompositions_total", float(sum(bool(s.was_decomposed) for s in stats))),
    )
    urls = ", ".join(f"http://127.0.0.1:{p}/metrics" for p in ports)
    click.echo(f"\nmetrics scraped from {urls}")
    click.echo(f"{'counter':<40} {'metrics':>8} {'results':>8}")
    for name, expected in rows:
        click.echo(f"{name:<40} {totals.get(name, 0.0):>8.0f} {expected:>8.0f}")


def _answer(producer: Producer, handle: JobHandle) -> RetrievalResult | None:
    from ferret.errors import ResultTimeout

    try:
        return producer.wait(handle, 30.0)
    except ResultTimeout:
        return None


def _show(producer: Producer, jobs, results, elapsed: float) -> None:
    from rich.table import Table

    from ferret.cli import render

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (("queue", "left"), ("status", "left"), ("route", "left"), ("split", "left"),
                          ("retry", "right"), ("repl", "right"), ("hits", "right"), ("query", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for (queue, text), result in zip(jobs, results, strict=False):
        if result is None:
            table.add_row(queue, "timeout", "", "", "", "", "", text)
            continue
        s = result.stats
        table.add_row(queue, result.status, s.route or "-", "yes" if s.was_decomposed else "no", str(s.retries or 0),
                      f"{s.replacements_successful or 0}/{s.replacements_attempted or 0}", str(len(result.results)),
                      text)
    render.show(table)
    click.echo(f"\nall {len(jobs)} jobs answered in {elapsed:.2f}s")
    first = results[0]
    if first is not None:
        click.echo(f"\n--- {jobs[0][1]}\n")
        render.show(render.results_table(first), "", render.stats_block(first))
        click.echo("\ncontext to inject:\n" + render.visible(first.context))
        click.echo()
        render.show(render.waterfall(producer.trace(first.job_id)))
