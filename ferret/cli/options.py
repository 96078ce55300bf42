"""Options shared by several commands, and the settings/Redis plumbing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ferret.cli import exit_codes
from ferret.errors import FerretError

if TYPE_CHECKING:  # the rest is imported by the commands that use it: 'ferret --help' stays quick
    import redis

    from ferret.redis_plumbing.embedded_redis import SharedRedis
    from ferret.settings import Settings


def settings_of(ctx: click.Context) -> Settings:
    return ctx.find_root().obj["settings"]


def shared_redis(settings: Settings) -> SharedRedis:
    from ferret.redis_plumbing.embedded_redis import shared_redis_for

    return shared_redis_for(settings)


def redis_url(settings: Settings) -> str:
    """The configured URL, else the shared embedded server's (started, and
    said so, if it was not running)."""
    from ferret.redis_plumbing.embedded_redis import redis_url_for

    def said(shared: SharedRedis) -> None:
        idle = settings.redis.embedded_idle_seconds
        until = f"after {idle:g} s with no client or " if idle else ""
        click.echo(f"started the embedded Redis at {shared.url} (data in {shared.directory}; it stops {until}"
                   "on 'ferret redis stop')", err=True)

    return redis_url_for(settings, said)


@contextmanager
def connected(ctx: click.Context, wait: bool = False) -> Iterator[redis.Redis]:
    """A Redis client for the command; every failure to get one is one ``error:``
    line and its exit code (2 for a bad URL, 3 when Redis does not answer).
    ``wait``: a Redis that does not answer is waited for, for as long as it takes (a worker starting
    while Redis is away waits for it, as a running worker does; SIGTERM still stops it)."""
    import redis

    from ferret.errors import RedisUnreachable
    from ferret.redis_plumbing.redis_conn import REDIS_AWAY, answers_at_once, client_for, reason, redacted
    from ferret.redis_plumbing.redis_retry import RECONNECT_SECONDS

    settings = settings_of(ctx)
    try:
        url = redis_url(settings)
        client = client_for(url)
    except FerretError as exc:
        fail(exc)
    if not answers_at_once(url):
        how_long = "until it does" if wait else f"for about {RECONNECT_SECONDS} s"
        click.echo(f"Redis at {redacted(url)} is not answering; retrying {how_long} ...", err=True)
        while True:
            try:
                client.ping()
                break
            except redis.RedisError as exc:
                if not wait:
                    click.echo(f"error: cannot reach Redis at {redacted(url)}: {reason(exc)}", err=True)
                    sys.exit(exit_codes.UNAVAILABLE)
                time.sleep(1.0)
        if wait:
            click.echo(f"Redis at {redacted(url)} answers; starting", err=True)
    try:
        yield client
    except FerretError as exc:
        fail(exc)
    except REDIS_AWAY as exc:
        # Redis, a Sentinel or a Cluster shard out of reach in the middle of the command (past the client's
        # own retries): one line and exit 3, as at the start, never a traceback.
        fail(RedisUnreachable(f"Redis stopped answering ({redacted(url)}): {reason(exc)}"))
    finally:
        client.close()


def _valid_namespace(ctx: click.Context, _param: click.Parameter, namespace: str) -> str:
    """A namespace as a request would take it, checked before the command does anything."""
    from ferret.contract import parse_request

    try:
        parse_request({"query": "x", "namespace": namespace}, settings_of(ctx).limits)
    except FerretError as exc:
        fail(exc)
    return namespace


def namespace_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--namespace", "-n", default="default", show_default=True, callback=_valid_namespace,
                        help="Memory namespace (tenant).")(func)


def history_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--history", "history", multiple=True, metavar="TURN",
                        help="An earlier message of the conversation, oldest first (repeat): 'it', 'the other one' "
                             "in the query are resolved from them.")(func)


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--type", "node_type", help="Only memories of this type."),
        click.option("--subtype", help="Only this subtype, e.g. custom:lesson."),
        click.option("--lifecycle", help="Only this lifecycle state, e.g. ACTIVE."),
        click.option("--since", help="Time range start (ISO 8601)."),
        click.option("--until", help="Time range end (ISO 8601)."),
        click.option("--time-field", type=click.Choice(["event", "ingestion", "any"]), default="any",
                     show_default=True, help="Which time the range applies to."),
        click.option("--cluster", "clusters", multiple=True, help="Only memories in this cluster (repeat)."),
        click.option("--filters", "filters_json", help="Filters as a JSON object (overrides the above)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def build_filters(node_type: str | None, subtype: str | None, lifecycle: str | None, since: str | None,
                  until: str | None, time_field: str, clusters: tuple[str, ...],
                  filters_json: str | None) -> dict[str, Any]:
    if filters_json:
        from ferret.json_input import parse_object

        return parse_object(filters_json, "filters")
    data: dict[str, Any] = {}
    if node_type:
        data["type"] = node_type
    if subtype:
        data["subtype"] = subtype
    if lifecycle:
        data["lifecycle"] = lifecycle
    if since or until:
        data["time_range"] = {"start": since, "end": until, "type": time_field}
    if clusters:
        data["cluster_ids"] = list(clusters)
    return data


def fail(exc: FerretError) -> NoReturn:
    """One ``error:`` line, and the exit code of the table in ``exit_codes``."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(exit_codes.for_error(exc))

