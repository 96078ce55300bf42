"""``ferret batch``: reprocess many queries, resumably."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from ferret.cli import exit_codes
from ferret.cli.options import connected, fail, settings_of
from ferret.errors import FerretError


@click.command()
@click.argument("input_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL file the results are written to.")
@click.option("--resume", is_flag=True,
              help="Continue the run recorded for OUT (OUT.run.json): keep OUT, enqueue only lines with no final "
                   "result, under the same request ids.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              help="Seconds to wait for the last results; also how long the batch waits for the workers to "
                   "make room for more lines before it stops (the rest left for --resume). 0: enqueue every "
                   "line at once and wait for none.")
@click.option("--no-cache", is_flag=True,
              help="Fresh answers: no line reads or writes the retrieval cache (unless its options say so).")
@click.option("--keep-results", is_flag=True,
              help="Keep each line's result (and trace) in Redis for its whole TTL "
                   "(service.batch_result_ttl_seconds), not only a minute after it is written to OUT.")
@click.pass_context
def batch(ctx: click.Context, input_file: Path, out_path: Path, resume: bool, wait_seconds: float,
          no_cache: bool, keep_results: bool) -> None:
    """Enqueue every request in INPUT_FILE (JSONL) and collect the results into OUT.

    \b
    A line of INPUT_FILE is one request (the fields of ferret query):
      {"query": "when is the dinner with Anna?", "namespace": "alice",
       "request_id": "q-17", "queue": "batch", "options": {"max_results": 5}}
    A line of OUT is a final result, written as it comes (its "line" is
    the input line it answers):
      {"line":1,"job_id":"fr-r-...","request_id":"q-17","status":"ok",
       "results":[{"id":"m1","score":1.3,...}],"context":"- ...",...}
    \b
    Every run computes every line anew: a run has its own id (kept in
    OUT.run.json), and a line without a request_id is named by the run, its
    line number and its content. Running the same file again after a memory
    or settings change therefore gives fresh answers. --resume continues the
    run recorded for OUT instead (an interrupted or unfinished one): lines
    already answered in OUT are kept, the rest enqueued again under the same
    ids, never twice. A line with its own request_id keeps it, and the same
    id is the same job while its claim lasts (an hour by default): a re-run
    then answers it with the earlier job, and the summary counts it as
    "reused" (its output line says "reused": true); drop the request_id, or
    give a new one, for a fresh answer.

    A file of any size: the batch keeps only as many lines in flight as the
    workers drain in a few seconds (at most a quarter of a line's deadline,
    30 s), enqueueing more as results come, so no line waits in the queue
    past its deadline. A result written to OUT stays in Redis a minute more,
    then goes (--keep-results keeps it for its TTL); a line with its own
    request_id keeps its result, which others may wait on.

    \b
    Exit 0 when every line has an answer (ok or partial), 1 when some failed,
    expired or were invalid, 5 when some had no final answer within --wait
    (continue with --resume)."""
    from ferret.cli.render import BatchProgressBars
    from ferret.producer.batch import run_batch
    from ferret.producer.client import Producer

    with input_file.open(encoding="utf-8", errors="replace") as counted:
        total = sum(1 for line in counted if line.strip())
    again = f"ferret batch {input_file} --out {out_path} --resume"
    signal.signal(signal.SIGTERM, _interrupted)  # a stop asked for says how to finish, as Ctrl-C does
    try:
        with connected(ctx) as client:
            producer = Producer(client, settings_of(ctx))
            with BatchProgressBars(total) as bars, input_file.open(encoding="utf-8", errors="replace") as lines:
                # read as it goes: the producer holds the lines in flight, not the file
                summary = run_batch(producer, (line.rstrip("\r\n") for line in lines), out_path, resume=resume,
                                    wait_seconds=wait_seconds, cache=not no_cache, progress=bars,
                                    keep_results=keep_results)
    except FerretError as exc:
        fail(exc)
    except KeyboardInterrupt:
        click.echo(f"interrupted: nothing already enqueued is lost; finish the run with: {again}", err=True)
        sys.exit(130)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.by_status.items())) or "none"
    reused = (f", {summary.reused} reused (their own request_id named an earlier job: its answer, not a new one; "
              "drop or change the request_id for a fresh answer)") if summary.reused else ""
    click.echo(f"{summary.total} requests ({'resumed' if resume else 'new'} run {summary.run}): {counts}; "
               f"{summary.skipped_done} already done, {summary.unfinished} unfinished{reused}"
               + (f", {summary.bad_results} with a forged or corrupt result (error: in their output lines)"
                  if summary.bad_results else ""), err=True)
    click.echo(json.dumps(summary.to_dict()))
    if summary.bad_results:
        sys.exit(exit_codes.BAD_RESULT)
    if summary.unfinished:
        click.echo(f"{summary.unfinished} line(s) have no final answer yet; continue with: {again}", err=True)
        sys.exit(exit_codes.NOT_YET)
    if summary.invalid or summary.by_status.get("failed") or summary.by_status.get("expired"):
        sys.exit(exit_codes.PARTLY)


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
