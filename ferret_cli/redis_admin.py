"""``ferret redis``: the shared embedded Redis (start, status, url, stop)."""

from __future__ import annotations

import sys

import click

from ferret_cli import exit_codes
from ferret_cli.options import redis_url, settings_of, shared_redis


def redacted(url: str) -> str:
    from ferret.redis_conn import redacted as redact  # redis only for the commands that use it

    return redact(url)


@click.group()
def redis() -> None:
    """The embedded Redis Ferret uses when no redis.url is set.

    One server per data directory (redis.embedded_dir), shared by every
    command, worker and tool; it stops after redis.embedded_idle_seconds
    with no client, or on 'ferret redis stop', its data saved.
    """


def _configured(ctx: click.Context) -> str | None:
    return settings_of(ctx).redis.url


def _refuse_if_configured(ctx: click.Context, why: str) -> None:
    """``start`` and ``stop`` concern the embedded server only: with a configured Redis, a usage error."""
    configured = _configured(ctx)
    if configured:
        click.echo(f"error: Ferret is configured to use the Redis at {redacted(configured)}; {why}", err=True)
        sys.exit(exit_codes.USAGE)


@redis.command()
@click.pass_context
def start(ctx: click.Context) -> None:
    """Start the embedded server (if it is not running) and print its URL."""
    _refuse_if_configured(ctx, "nothing embedded to start")
    click.echo(redis_url(settings_of(ctx)))


@redis.command()
@click.option("--show-password", is_flag=True, help="Print the password too (for a tool that connects with it).")
@click.pass_context
def url(ctx: click.Context, show_password: bool) -> None:
    """Print the URL Ferret uses, its password redacted unless asked
    (rq info -u "$(ferret redis url --show-password)")."""
    found = _configured(ctx) or shared_redis(settings_of(ctx)).url
    click.echo(found if show_password else redacted(found))


@redis.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """Whether the embedded server runs, where, and for how long it will stay."""
    if _configured(ctx):
        click.echo(f"Ferret is configured to use the Redis at {redacted(_configured(ctx) or '')}; "
                   "nothing embedded")
        return
    shared = shared_redis(settings_of(ctx))
    found = shared.status()
    if found is None:
        click.echo(f"not running (data in {shared.directory}); the next command that needs it starts it")
        sys.exit(exit_codes.UNAVAILABLE)
    click.echo(f"running at {found.url}")
    click.echo(f"  pid {found.server_pid}, up {found.uptime_seconds:.0f} s, {found.keys} keys, "
               f"{found.used_memory_human} used, data in {found.directory}")
    if found.idle_seconds is None:
        stops = "no keeper: it stops only on 'ferret redis stop'"
    elif found.idle_seconds == 0:
        stops = "it stops only on 'ferret redis stop'"
    elif found.idle_for is not None:
        left = max(0.0, found.idle_seconds - found.idle_for)
        stops = f"idle for {found.idle_for:.0f} s: it stops in about {left:.0f} s unless a client connects"
    else:
        stops = f"it stops after {found.idle_seconds:g} s with no client"
    click.echo(f"  {found.clients} client(s) connected; {stops}")


@redis.command()
@click.pass_context
def stop(ctx: click.Context) -> None:
    """Stop the embedded server, its data saved."""
    _refuse_if_configured(ctx, "it is not Ferret's to stop")
    shared = shared_redis(settings_of(ctx))
    if shared.stop():
        click.echo(f"stopped the embedded Redis; data saved in {shared.directory}")
    else:
        click.echo("the embedded Redis was not running")
