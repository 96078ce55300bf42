"""``ferret``: the command line. Memory commands and the in-process run."""

from __future__ import annotations

import json
import logging
import sys

import click

from ferret.contract import parse_request
from ferret.errors import FerretError
from ferret.ingest import parse_memory_lines
from ferret.settings import load_settings
from ferret_cli import render
from ferret_cli.options import (
    build_filters,
    connected,
    fail,
    filter_options,
    namespace_option,
    settings_of,
)
from worker.backends.local import MemoryStore
from worker.backends.writers import writer_for


@click.group()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), envvar="FERRET_CONFIG",
              help="YAML settings file (default: built-in defaults + FERRET_* environment).")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str) -> None:
    """Ferret: retrieval orchestration on Redis and RQ workers."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        ctx.obj = {"settings": load_settings(config_path)}
    except FerretError as exc:
        fail(exc)


@cli.command()
@click.argument("file", type=click.File("r", encoding="utf-8", errors="replace"))
@namespace_option
@click.option("--replace", is_flag=True, help="Delete the namespace's memories (and co-retrieval weights) first.")
@click.pass_context
def ingest(ctx: click.Context, file, namespace: str, replace: bool) -> None:
    """Load memories from a JSONL FILE (one node per line; '-' for stdin).

    Valid lines are stored even when others are malformed; each malformed
    line is reported, and the exit code is then 1.
    """
    memories, errors = parse_memory_lines(file)
    try:
        parse_request({"query": "x", "namespace": namespace}, settings_of(ctx).limits)
    except FerretError as exc:
        fail(exc)
    settings = settings_of(ctx)
    if replace and settings.backend.kind != "local":
        fail(FerretError("--replace clears a local namespace; a Nous server's memories are managed on the server"))
    with connected(ctx) as client:
        try:
            writer = writer_for(settings, client, namespace)
            if replace and isinstance(writer, MemoryStore):
                writer.clear()
            stored = writer.upsert(memories)
        except FerretError as exc:
            fail(exc)
        total = f" ({writer.count()} in all)" if isinstance(writer, MemoryStore) else ""
    for error in errors:
        click.echo(f"skipped {error}", err=True)
    click.echo(f"stored {stored} memories in namespace {namespace!r}{total}; "
               f"{len(errors)} invalid line(s) skipped")
    if errors:
        sys.exit(1)


@cli.command()
@click.argument("ids", nargs=-1, required=True)
@namespace_option
@click.pass_context
def forget(ctx: click.Context, ids: tuple[str, ...], namespace: str) -> None:
    """Delete memories by id."""
    with connected(ctx) as client:
        try:
            removed = writer_for(settings_of(ctx), client, namespace).delete(ids)
        except FerretError as exc:
            fail(exc)
    click.echo(f"deleted {removed} of {len(ids)} memories from namespace {namespace!r}")


@cli.command()
@click.argument("query")
@namespace_option
@filter_options
@click.option("--max-results", type=int, help="Cap on results (default from settings).")
@click.option("--deadline", type=float, help="Seconds the pipeline may take.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result document as JSON.")
@click.pass_context
def run(ctx: click.Context, query: str, namespace: str, max_results: int | None, deadline: float | None,
        as_json: bool, **filter_args) -> None:
    """Run the pipeline in-process for QUERY and print results, stats and trace."""
    from worker.inprocess import run_in_process

    settings = settings_of(ctx)
    try:
        request = parse_request({
            "query": query, "namespace": namespace, "filters": build_filters(**filter_args),
            "deadline_seconds": deadline, "options": {"max_results": max_results},
        }, settings.limits)
        with connected(ctx) as client:
            result, trace = run_in_process(client, settings, request)
    except FerretError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps({**result.model_dump(mode="json"), "trace": trace}, indent=2))
        return
    click.echo(render.results_table(result))
    click.echo()
    click.echo(render.stats_block(result))
    click.echo()
    click.echo(render.waterfall(trace))


def _register() -> None:
    from ferret_cli import batch, bench, demo, service

    for command in (*service.COMMANDS, batch.batch, demo.demo, bench.bench):
        cli.add_command(command)


_register()

if __name__ == "__main__":
    cli()
