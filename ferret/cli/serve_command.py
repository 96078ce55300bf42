"""``ferret serve`` (the HTTP API) and ``ferret keys`` (its keys)."""

from __future__ import annotations

import json

import click

from ferret.cli.options import connected, fail, settings_of
from ferret.errors import ConfigError, FerretError


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Not loopback: only with --tls-cert/--tls-key or --behind-tls-proxy.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS: the certificate (PEM).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS: its private key (PEM).")
@click.option("--behind-tls-proxy", is_flag=True,
              help="Plain HTTP on a non-loopback address, because a proxy in front terminates TLS.")
@click.option("--no-mcp", is_flag=True, help="Do not serve the MCP tools at /mcp.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, tls_cert: str | None, tls_key: str | None,
          behind_tls_proxy: bool, no_mcp: bool) -> None:
    """Serve the HTTP API (and the MCP tools at /mcp) behind per-namespace keys (ferret keys create).

    Searches go through the queue: run workers (ferret worker) as for any producer.
    Needs the serve extra: pip install 'ferret-memory[serve]'."""
    settings = settings_of(ctx)
    try:
        from ferret.serve.exposure import check_exposure

        check_exposure(host, tls_cert, tls_key, behind_tls_proxy)
        try:
            from ferret.producer.http_guard import serve as run
            from ferret.serve.app import build_app
        except ImportError as exc:
            raise ConfigError(f"ferret serve needs the serve extra (pip install 'ferret-memory[serve]'): "
                              f"{exc}") from None
        from ferret.producer.api import connect_async

        app = build_app(settings, connect_async(settings), mcp=not no_mcp, host=host)
    except FerretError as exc:
        fail(exc)
    _open_files_for_many_waiters()
    scheme = "https" if tls_cert else "http"
    click.echo(f"ferret serve: {scheme}://{host}:{port} (OpenAPI at /openapi.json"
               f"{'' if no_mcp else ', MCP at /mcp'})", err=True)
    tls: dict[str, str] = {"ssl_certfile": tls_cert, "ssl_keyfile": tls_key} if tls_cert and tls_key else {}
    run(app, host, port, head_seconds=settings.http.head_timeout_seconds, idle_seconds=settings.http.idle_seconds,
        on_closed_slow=app.metrics.refusals.labels("head_too_slow").inc, **tls)


def _open_files_for_many_waiters() -> None:
    """A server holds a socket per waiting client: its soft limit on open files is raised to the hard one
    (1,024 is a common soft default)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65_536, hard))


@click.group("keys")
def keys() -> None:
    """The HTTP API's keys: each reaches only its namespaces; stored as a hash, shown once."""


@keys.command("create")
@click.option("--namespace", "-n", "namespaces", multiple=True, required=True,
              help="A namespace the key reaches (repeat for several; MCP needs a key for one).")
@click.option("--read-only", is_flag=True, help="Search and read only: no writing or deleting memories.")
@click.option("--rate", help="Its own request rate (e.g. 600/minute) instead of http.rate_limit.")
@click.option("--label", default="", help="A name to tell keys apart in ferret keys list.")
@click.pass_context
def create(ctx: click.Context, namespaces: tuple[str, ...], read_only: bool, rate: str | None, label: str) -> None:
    """Make a key. The key is the last line of standard output, shown this once."""
    from ferret.serve.api_keys import KeyStore

    with connected(ctx) as client:
        try:
            key, record = KeyStore(client).create(list(namespaces), read_only, rate, label, settings_of(ctx).limits)
        except FerretError as exc:
            fail(exc)
    access = "read-only" if record.read_only else "read-write"
    click.echo(f"key {record.key_id} ({access}) for {', '.join(record.namespaces)}; it is shown once, and "
               "stored only as a hash:")
    click.echo(key)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per key.")
@click.pass_context
def list_keys(ctx: click.Context, as_json: bool) -> None:
    """Every key's id, namespaces, access, rate and state (never the key)."""
    from ferret.serve.api_keys import KeyStore

    with connected(ctx) as client:
        found = KeyStore(client).all()
    for record in found:
        if as_json:
            click.echo(json.dumps(record.public()))
        else:
            state = "revoked" if record.revoked_at else "live"
            click.echo(f"{record.key_id}  {state:7}  {'read-only ' if record.read_only else 'read-write'}  "
                       f"{','.join(record.namespaces)}  {record.rate or '-'}  {record.label}")


@keys.command("revoke")
@click.argument("key_id")
@click.pass_context
def revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke a key by its id: every server refuses it within a second."""
    from ferret.serve.api_keys import KeyStore

    with connected(ctx) as client:
        try:
            record = KeyStore(client).revoke(key_id)
        except FerretError as exc:
            fail(exc)
    click.echo(f"revoked key {record.key_id} ({', '.join(record.namespaces)})")


COMMANDS = (serve, keys)
