"""``ferret redis``: the shared embedded Redis (start, status, url, stop)."""

from __future__ import annotations

import sys

import click

from ferret.cli import exit_codes
from ferret.cli.options import redis_url, settings_of, shared_redis


def redacted(url: str) -> str:
    from ferret.redis_plumbing.redis_conn import redacted as redact  # redis only for the commands that use it

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
@click.option("--force", is_flag=True,
              help="Stop it even with workers connected (they log connection errors until it is back).")
@click.pass_context
def stop(ctx: click.Context, force: bool) -> None:
    """Stop the embedded server, its data saved.

    With workers connected it refuses unless --force: stop the workers
    first (SIGTERM; each finishes its job in hand)."""
    import time

    _refuse_if_configured(ctx, "it is not Ferret's to stop")
    shared = shared_redis(settings_of(ctx))
    if not shared.running():
        click.echo("the embedded Redis was not running")
        return
    clients, workers = _connected(shared.socket)
    if workers and not force:
        click.echo(f"error: {len(workers)} worker(s) are connected ({', '.join(workers)}): stop them first "
                   "(SIGTERM: each finishes its job in hand), or pass --force", err=True)
        sys.exit(exit_codes.USAGE)
    said = f"{clients} other client(s) connected" + (f", {len(workers)} of them worker(s)" if workers else "")
    click.echo(f"stopping the embedded Redis ({said}): saving its data ...", err=True)
    started = time.monotonic()
    shared.stop()
    click.echo(f"stopped the embedded Redis in {time.monotonic() - started:.1f} s; data saved in "
               f"{shared.directory}")


def _connected(socket: object) -> tuple[int, list[str]]:
    """How many clients besides this one are connected, and the workers' names."""
    import redis as redis_py

    from ferret.redis_plumbing.redis_keeper import KEEPER_NAME
    from ferret.rq_layer.producer_side import worker_names

    client = redis_py.Redis(unix_socket_path=str(socket), socket_timeout=2)
    try:
        others = [c for c in client.client_list() if c.get("name") != KEEPER_NAME]  # its own keeper is no client
        return max(0, len(others) - 1), worker_names(client)
    except redis_py.RedisError:
        return 0, []
    finally:
        client.close()
