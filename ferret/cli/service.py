"""Queue-service commands: worker, query, result, trace."""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING

import click

from ferret.cli import exit_codes
from ferret.cli.options import (
    build_filters,
    connected,
    fail,
    filter_options,
    history_option,
    namespace_option,
    settings_of,
)
from ferret.errors import FerretError, InvalidRequest, ResultTimeout
from ferret.records import visible

if TYPE_CHECKING:
    import redis

    from ferret.producer.client import JobHandle, Producer


def _producer(ctx: click.Context, client: redis.Redis) -> Producer:
    from ferret.producer.client import Producer  # rq and the producer only for the commands that use them

    return Producer(client, settings_of(ctx))


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _worker_log_levels(ctx: click.Context, explicit: str | None, verbose: bool, quiet: bool) -> tuple[str, str]:
    """(Ferret's level, RQ's level): the worker's own option, else the
    group's ``--log-level`` if given, else INFO for Ferret and WARNING for RQ
    (whose INFO is two lines per job with its arguments)."""
    root = ctx.find_root()
    group_level = root.params.get("log_level") if root.get_parameter_source("log_level") \
        == click.core.ParameterSource.COMMANDLINE else None
    chosen = (explicit or group_level or "").upper()
    if chosen:
        return chosen, chosen
    if verbose:
        return "DEBUG", "INFO"
    if quiet:
        return "WARNING", "WARNING"
    return "INFO", "WARNING"


@click.command()
@click.argument("queue_names", nargs=-1, metavar="[QUEUES]...")
@click.option("--queues", help="Comma-separated queues (the same as QUEUES; default: prefetch and batch). "
                               "prefetch is always served before batch.")
@click.option("-u", "--url", help="Redis URL (as rq's -u; default: settings, FERRET_REDIS__URL, RQ_REDIS_URL).")
@click.option("--burst", is_flag=True, help="Exit when the queues are empty.")
@click.option("--worker-class", type=click.Choice(["simple", "fork"]),
              help="RQ worker class (default from settings: simple).")
@click.option("--name", help="The worker's name in RQ's registry (default: RQ's).")
@click.option("--max-jobs", type=click.IntRange(min=1),
              help="Exit after this many RQ jobs (a batch carrier of several lines is one).")
@click.option("--max-idle-time", type=click.IntRange(min=1), help="Exit after this many seconds with nothing to do.")
@click.option("--log-level", "worker_log_level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              help="Default INFO: a line when it starts listening and one per finished job (RQ's own "
                   "messages from WARNING). Also 'ferret --log-level X worker'.")
@click.option("-v", "--verbose", is_flag=True, help="DEBUG, and RQ's own INFO lines (each job's start and end).")
@click.option("-q", "--quiet", is_flag=True, help="WARNING: only problems.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus metrics on this port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address to serve metrics on.")
@click.pass_context
def worker(ctx: click.Context, queue_names: tuple[str, ...], queues: str | None, url: str | None, burst: bool,
           worker_class: str | None, name: str | None, max_jobs: int | None, max_idle_time: int | None,
           worker_log_level: str | None, verbose: bool, quiet: bool, metrics_port: int | None,
           metrics_host: str) -> None:
    """Run a worker for Ferret's retrieval jobs on QUEUES (default: prefetch batch).

    It serves until SIGTERM or Ctrl-C (the job in hand finishes first), or,
    with --burst, until the queues are empty."""
    from ferret.rq_layer.runner import run_worker

    if url:
        root = ctx.find_root()
        root.obj["settings"] = settings_of(ctx).model_copy(
            update={"redis": settings_of(ctx).redis.model_copy(update={"url": url})})
    settings = settings_of(ctx)
    names = list(queue_names) + [q.strip() for q in (queues or "").split(",") if q.strip()]
    names = names or ["prefetch", "batch"]
    if verbose and quiet:
        fail(InvalidRequest("--verbose", "choose one of --verbose and --quiet"))
    level, rq_level = _worker_log_levels(ctx, worker_log_level, verbose, quiet)
    logging.getLogger().setLevel(level)
    if level != "DEBUG":  # httpx logs every request at INFO: one line per job is the worker's own
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with connected(ctx, wait=True) as client:
            run_worker(client, settings, names, burst=burst, worker_class=worker_class, log_level=level,
                       rq_log_level=rq_level,
                       metrics_port=metrics_port, metrics_host=metrics_host, name=name, max_jobs=max_jobs,
                       max_idle_time=max_idle_time)
    except FerretError as exc:
        fail(exc)
    except OSError as exc:  # the metrics port is taken, or its address is not ours
        click.echo(f"error: cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}", err=True)
        sys.exit(exit_codes.USAGE)


def _not_yet(handle: JobHandle, pending: ResultTimeout, as_json: bool, now: float) -> None:
    queue = handle.queue
    state = {"job_id": pending.job_id, "status": None, "rq_state": pending.rq_state}
    click.echo(json.dumps(state) if as_json else
               f"job {pending.job_id} enqueued on {queue}; no final result yet (RQ state {pending.rq_state})")
    if pending.workers == 0:
        click.echo(f"no worker is serving queue {queue}: start one with 'ferret worker'; the job "
                   "waits for it and ends expired once its deadline has passed", err=True)
    late = now - handle.deadline_at if handle.deadline_at is not None else None
    if late is not None and late > 0 and pending.rq_state == "queued":
        click.echo(f"its deadline passed {late:.1f} s ago: it can no longer be answered in time and ends "
                   "expired when a worker takes it", err=True)


@click.command()
@click.argument("text")
@namespace_option
@history_option
@filter_options
@click.option("--queue", type=click.Choice(["prefetch", "batch"]), default="prefetch", show_default=True,
              help="prefetch: short deadline (5 s), served first; batch: long deadline (600 s).")
@click.option("--request-id", help="Idempotency key: the same id is one job.")
@click.option("--deadline", type=float, help="Seconds from now (default per queue).")
@click.option("--max-results", type=int, help="Cap on results (default from settings: 20).")
@click.option("--rerank", is_flag=True, help="Ask for the LLM re-rank (when switched on in the settings).")
@click.option("--explicit", is_flag=True, help="An explicit recall: stronger co-retrieval strengthening.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the retrieval cache: a fresh answer.")
@click.option("--agent", is_flag=True, help="Run the agent loop (when agent.enabled), whatever the route.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds to wait for the result (0: just enqueue).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result document as JSON (ASCII).")
@click.pass_context
def query(ctx: click.Context, text: str, namespace: str, history: tuple[str, ...], queue: str, request_id: str | None,
          deadline: float | None, max_results: int | None, rerank: bool, explicit: bool, no_cache: bool, agent: bool,
          wait_seconds: float,
          as_json: bool, **filter_args) -> None:
    """Enqueue a retrieval job for TEXT and (by default) wait for its result."""
    try:
        with connected(ctx) as client:
            producer = _producer(ctx, client)
            handle = producer.enqueue({
                "query": text, "namespace": namespace, "queue": queue, "request_id": request_id,
                "deadline_seconds": deadline, "filters": build_filters(**filter_args), "history": list(history),
                "options": {"max_results": max_results, "rerank": rerank,
                            "recall": "explicit" if explicit else "auto", "cache": not no_cache, "agent": agent},
            })
            try:
                result = producer.wait(handle, wait_seconds)
            except ResultTimeout as pending:
                _not_yet(handle, pending, as_json, producer.clock.time())
                sys.exit(exit_codes.OK if wait_seconds == 0 else exit_codes.NOT_YET)
    except FerretError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))  # ASCII: nothing raw reaches a terminal
    else:
        from ferret.cli import render

        click.echo(f"job {result.job_id}")
        render.show(render.results_table(result), render.stats_block(result))
    sys.exit(exit_codes.for_status(result.status))


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result document as JSON (ASCII).")
@click.pass_context
def result(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Show the result of JOB_ID (or its current status)."""
    with connected(ctx) as client:
        producer = _producer(ctx, client)
        found = producer.result(job_id)
        if found is None:
            state = producer.status(job_id)
            if state.rq_state in ("failed", "stopped", "canceled"):
                why = producer.queues.ended_reason(job_id)
                click.echo(f"error: job {job_id} was {state.rq_state} by RQ with no Ferret result"
                           + (f" ({why})" if why else "") + "; it will not run again by itself: enqueue the "
                           "request again (the same request id runs it again), or 'ferret batch --resume'",
                           err=True)
                sys.exit(exit_codes.ENDED_BY_RQ)
            click.echo(json.dumps(state.to_dict()) if as_json else
                       f"job {job_id}: no final result yet (RQ state {state.rq_state})" if state.known else
                       f"job {job_id}: unknown (no result and no RQ job: never enqueued, or expired)")
            sys.exit(exit_codes.NOT_YET if state.known else exit_codes.NOT_FOUND)
    if as_json:
        click.echo(json.dumps(found.model_dump(mode="json"), indent=2))
    else:
        from ferret.cli import render

        render.show(render.results_table(found), render.stats_block(found))
        if found.context:
            click.echo("\ncontext:\n" + visible(found.context))
    sys.exit(exit_codes.for_status(found.status))


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON (its spans, with timings).")
@click.pass_context
def trace(ctx: click.Context, job_id: str, as_json: bool) -> None:
    """Draw the trace of JOB_ID as a waterfall."""
    try:
        with connected(ctx) as client:
            spans = _producer(ctx, client).trace(job_id)
    except FerretError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(spans, indent=2))
    else:
        from ferret.cli import render

        render.show(render.waterfall(spans))


COMMANDS = (worker, query, result, trace)
