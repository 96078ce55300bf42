"""``ferret mcp``: serve one namespace's memory to agents over the Model Context Protocol."""

from __future__ import annotations

import click

from ferret.cli.options import fail, settings_of
from ferret.errors import ConfigError, FerretError


@click.command("mcp")
@click.option("--namespace", "-n", required=True,
              help="The one namespace this server reads and writes (tools cannot name another).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio: the agent starts this command; http: streamable HTTP at http://HOST:PORT/mcp.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on (http).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port (http).")
@click.option("--head-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 600),
              help="Seconds a connection has to send a request's head (http): slower ones are closed.")
@click.option("--read-only", is_flag=True, help="remember and forget refuse: the model can only read the memory.")
@click.pass_context
def mcp(ctx: click.Context, namespace: str, transport: str, host: str, port: int, head_timeout: float,
        read_only: bool) -> None:
    """Serve NAMESPACE's memory as MCP tools: search_memory, remember, forget, prefetch, get_context.

    Searches go through the queue: run workers (ferret worker) as for any producer.
    Needs the mcp extra: pip install 'ferret-memory[mcp]'."""
    from ferret.contract import parse_request

    try:
        checked = parse_request({"query": "x", "namespace": namespace}, settings_of(ctx).limits).namespace
        try:
            from ferret.producer.mcp_server import build_server, check_loopback
        except ImportError as exc:
            raise ConfigError(f"ferret mcp needs the mcp extra (pip install 'ferret-memory[mcp]'): {exc}") from None
        from ferret.producer.api import AsyncClient, connect_async

        if transport == "http":
            check_loopback(host)
        made: list[AsyncClient] = []

        def client() -> AsyncClient:
            if not made:
                made.append(connect_async(settings_of(ctx)))
            return made[0]

        server = build_server(checked, client, read_only=read_only)
    except FerretError as exc:
        fail(exc)
    if transport == "stdio":
        server.run("stdio")  # stdout carries the protocol: logs go to stderr
    else:
        from ferret.producer.http_guard import serve

        click.echo(f"ferret mcp: namespace {checked!r} at http://{host}:{port}/mcp", err=True)
        serve(server.streamable_http_app(host=host), host, port, head_seconds=head_timeout)
