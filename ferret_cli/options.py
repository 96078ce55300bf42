"""Options shared by several commands, and the settings/Redis plumbing."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
import redis

from ferret.errors import FerretError
from ferret.json_input import parse_object
from ferret.redis_conn import client_for, redacted, redis_url
from ferret.settings import Settings


def settings_of(ctx: click.Context) -> Settings:
    return ctx.find_root().obj["settings"]


@contextmanager
def connected(ctx: click.Context) -> Iterator[redis.Redis]:
    settings = settings_of(ctx)
    with redis_url(settings) as url:
        client = client_for(url)
        try:
            client.ping()
        except redis.RedisError as exc:
            raise click.ClickException(f"cannot reach Redis at {redacted(url)}: {exc}") from None
        try:
            yield client
        finally:
            client.close()


def namespace_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--namespace", "-n", default="default", show_default=True,
                        help="Memory namespace (tenant).")(func)


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


def fail(exc: FerretError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(2)

