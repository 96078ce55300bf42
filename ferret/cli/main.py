"""``ferret``: the command line. Memory commands and the in-process run."""

from __future__ import annotations

import codecs
import json
import logging
import sys
import time

import click

from ferret.cli.options import (
    build_filters,
    connected,
    fail,
    filter_options,
    history_option,
    namespace_option,
    settings_of,
)
from ferret.errors import FerretError, InvalidRequest


@click.group()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), envvar="FERRET_CONFIG",
              help="YAML settings file (default: built-in defaults + FERRET_* environment).")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str) -> None:
    """Ferret: retrieval orchestration on Redis and RQ workers."""
    from ferret.settings import load_settings

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        ctx.obj = {"settings": load_settings(config_path)}
    except FerretError as exc:
        fail(exc)


@cli.command()
@click.argument("file", type=click.File("rb"))
@namespace_option
@click.option("--replace", is_flag=True, help="Delete the namespace's memories (and co-retrieval weights) first.")
@click.option("--encoding", default="utf-8", show_default=True,
              help="The file's text encoding; a line that does not decode is refused, naming the line.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(1, 100_000),
              help="Lines read, and memories written, at a time.")
@click.option("--index/--no-index", "build_index", default=True, show_default=True,
              help="After loading a large namespace (local backend), build its index snapshot.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.pass_context
def ingest(ctx: click.Context, file, namespace: str, replace: bool, encoding: str, batch_size: int,
           build_index: bool, quiet: bool) -> None:
    """Load memories from a JSONL FILE (one node per line; '-' for stdin).

    Streams: a batch of lines is parsed and stored before the next is read,
    so a file of any size loads in bounded memory; progress goes to stderr.
    Valid lines are stored even when others are malformed; each malformed
    line is reported, and the exit code is then 1.
    """
    from ferret.ingest import memory_batches
    from ferret.key_migration import tag_store_keys
    from ferret.redis_plumbing.store_conn import store_client
    from ferret.worker.backends.local import MemoryStore
    from ferret.worker.backends.writers import writer_for

    settings = settings_of(ctx)
    try:
        codecs.lookup(encoding)
    except LookupError:
        fail(InvalidRequest("encoding", f"unknown encoding {encoding!r}"))
    if replace and settings.backend.kind != "local":
        fail(FerretError("--replace clears a local namespace; a Nous server's memories are managed on the server"))
    stored = skipped = 0
    started = last_report = time.monotonic()
    with connected(ctx) as client:
        store = store_client(settings, client)
        try:
            tag_store_keys(store)
            writer = writer_for(settings, store, namespace)
            if replace and isinstance(writer, MemoryStore):
                writer.clear()
            for memories, errors in memory_batches(file, batch_size, encoding):
                stored += writer.upsert(memories)
                skipped += len(errors)
                for error in errors:
                    click.echo(f"skipped {error}", err=True)
                if not quiet and time.monotonic() - last_report >= 1.0:
                    last_report = time.monotonic()
                    rate = stored / max(1e-9, last_report - started)
                    click.echo(f"ingest: {stored:,} stored, {skipped:,} skipped ({rate:,.0f}/s)", err=True)
        except FerretError as exc:
            fail(exc)
        total = writer.count() if isinstance(writer, MemoryStore) else None
        if build_index and total is not None and total > settings.backend.local.inline_build_max:
            from ferret.worker.backends.index_builder import build_snapshot
            from ferret.worker.backends.tantivy_index import limit_malloc_arenas
            limit_malloc_arenas()
            if not quiet:
                click.echo(f"ingest: building the index snapshot of {total:,} memories", err=True)
            manifest = build_snapshot(store, namespace, settings.backend.local)
            click.echo(f"index snapshot stored: {manifest.memories:,} memories, "
                       f"{manifest.size / 1e6:.1f} MB", err=True)
    in_all = f" ({total} in all)" if total is not None else ""
    click.echo(f"stored {stored} memories in namespace {namespace!r}{in_all}; {skipped} invalid line(s) skipped")
    if skipped:
        sys.exit(1)


@cli.command()
@click.argument("ids", nargs=-1, required=True)
@namespace_option
@click.pass_context
def forget(ctx: click.Context, ids: tuple[str, ...], namespace: str) -> None:
    """Delete memories by id."""
    from ferret.redis_plumbing.store_conn import store_client
    from ferret.worker.backends.writers import writer_for

    settings = settings_of(ctx)
    with connected(ctx) as client:
        try:
            removed = writer_for(settings, store_client(settings, client), namespace).delete(ids)
        except FerretError as exc:
            fail(exc)
    click.echo(f"deleted {removed} of {len(ids)} memories from namespace {namespace!r}")


@cli.command()
@click.argument("query")
@namespace_option
@history_option
@filter_options
@click.option("--max-results", type=int, help="Cap on results (default from settings).")
@click.option("--deadline", type=float, help="Seconds the pipeline may take.")
@click.option("--agent", is_flag=True, help="Run the agent loop (when agent.enabled), whatever the route.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result document as JSON.")
@click.pass_context
def run(ctx: click.Context, query: str, namespace: str, history: tuple[str, ...], max_results: int | None,
        deadline: float | None, agent: bool, as_json: bool, **filter_args) -> None:
    """Run the pipeline in-process for QUERY and print results, stats and trace."""
    from ferret.cli import render
    from ferret.contract import parse_request
    from ferret.worker.inprocess import run_in_process

    settings = settings_of(ctx)
    try:
        request = parse_request({
            "query": query, "namespace": namespace, "filters": build_filters(**filter_args),
            "deadline_seconds": deadline, "options": {"max_results": max_results, "agent": agent},
            "history": list(history),
        }, settings.limits)
        with connected(ctx) as client:
            result, trace = run_in_process(client, settings, request)
    except FerretError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps({**result.model_dump(mode="json"), "trace": trace}, indent=2))
        return
    render.show(render.results_table(result), "", render.stats_block(result), "", render.waterfall(trace))


def _register() -> None:
    from ferret.cli import (
        batch,
        bench,
        bench_lab,
        config_command,
        demo,
        llm_command,
        mcp_command,
        redis_admin,
        serve_command,
        service,
    )

    for command in (*service.COMMANDS, batch.batch, demo.demo, bench.bench, redis_admin.redis, mcp_command.mcp,
                    llm_command.llm, config_command.config, *serve_command.COMMANDS):
        cli.add_command(command)
    # the retrieval-tuning lab's, from a checkout
    for lab_command in (bench_lab.retrieval, bench_lab.peers, bench_lab.llm):
        bench.bench.add_command(lab_command)


_register()

if __name__ == "__main__":
    cli()
