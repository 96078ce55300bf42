"""``ferret batch``: reprocess many queries, resumably."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ferret.cli import exit_codes
from ferret.cli.options import connected, fail, settings_of
from ferret.errors import FerretError


@click.command()
@click.argument("input_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL file the results are written to.")
@click.option("--resume", is_flag=True, help="Keep OUT and re-enqueue only lines with no final result.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              help="Seconds to wait for all results.")
@click.option("--no-cache", is_flag=True,
              help="Fresh answers: no line reads or writes the retrieval cache (unless its options say so).")
@click.pass_context
def batch(ctx: click.Context, input_file: Path, out_path: Path, resume: bool, wait_seconds: float,
          no_cache: bool) -> None:
    """Enqueue every request in INPUT_FILE (JSONL) and collect the results into OUT.

    \b
    A line of INPUT_FILE is one request (the fields of ferret query):
      {"query": "when is the dinner with Anna?", "namespace": "alice",
       "request_id": "q-17", "queue": "batch", "options": {"max_results": 5}}
    A line of OUT is its final result, in input order:
      {"line": 1, "request_id": "q-17", "job_id": "fr-r-...", "status": "ok",
       "results": [{"id": "m1", "score": 1.3, ...}], "context": "- ...", ...}
    A line without a request_id gets one from the file name, line number and
    content, so --resume finds it again. Exit 0 when every line has an answer
    (ok or partial), 1 when some failed, expired or were invalid."""
    from ferret.cli.render import BatchProgressBars
    from ferret.producer.batch import run_batch
    from ferret.producer.client import Producer

    lines = input_file.read_text(encoding="utf-8", errors="replace").splitlines()
    total = sum(1 for line in lines if line.strip())
    try:
        with connected(ctx) as client:
            producer = Producer(client, settings_of(ctx))
            with BatchProgressBars(total) as bars:
                summary = run_batch(producer, lines, out_path, resume=resume, prefix=input_file.stem,
                                    wait_seconds=wait_seconds, cache=not no_cache, progress=bars)
    except FerretError as exc:
        fail(exc)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.by_status.items())) or "none"
    click.echo(f"{summary.total} requests: {counts}; {summary.skipped_done} already done, "
               f"{summary.unfinished} unfinished" + (f", {summary.bad_results} with a forged or corrupt result "
                                                     "(error: in their output lines)" if summary.bad_results else ""),
               err=True)
    click.echo(json.dumps(summary.to_dict()))
    if summary.bad_results:
        sys.exit(exit_codes.BAD_RESULT)
    if summary.unfinished:
        sys.exit(exit_codes.NOT_YET)
    if summary.invalid or summary.by_status.get("failed") or summary.by_status.get("expired"):
        sys.exit(exit_codes.PARTLY)
