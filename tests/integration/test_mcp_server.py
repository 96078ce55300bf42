"""``ferret mcp`` through the MCP SDK's own client, over stdio and streamable HTTP,
against a real redis-server and real workers of both classes: the tools listed,
each tool's happy path, a bad argument named, another namespace refused."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import free_port, wait_until
from tests.integration.http_support import closed_by_the_server

TOOLS = {"search_memory", "remember", "forget", "prefetch", "get_context"}


async def _exercise(client: Client) -> dict[str, Any]:
    """Every tool once, a bad argument and another namespace; what was seen."""
    seen: dict[str, Any] = {}
    listed = await client.list_tools()
    seen["tools"] = {tool.name: tool for tool in listed.tools}
    written = await client.call_tool("remember", {"memories": [
        {"id": "rome", "type": "plan", "content_body": "Flight to Rome on 3 May, economy class, seat 14C"},
        {"id": "anna", "type": "event", "content_body": "Dinner party for Anna on Friday at eight"},
    ]})
    seen["remember"] = written.structured_content
    found = await client.call_tool("search_memory", {"query": "flight to Rome", "max_results": 3})
    seen["search"] = found.structured_content
    started = await client.call_tool("prefetch", {"conversation": "trip", "query": "dinner party for Anna"})
    seen["prefetch"] = started.structured_content
    for _ in range(100):
        context = await client.call_tool("get_context", {"conversation": "trip"})
        if context.structured_content["ready"]:
            break
        await asyncio.sleep(0.1)
    seen["get_context"] = context.structured_content
    seen["forget"] = (await client.call_tool("forget", {"ids": ["anna", "nope"]})).structured_content
    seen["after_forget"] = (await client.call_tool("get_context", {"conversation": "trip"})).structured_content
    seen["bad"] = await client.call_tool("remember", {"memories": [{"id": "x", "content_body": 5}]})
    seen["other_namespace"] = await client.call_tool("search_memory", {"query": "Rome", "namespace": "other"})
    seen["bad_filter"] = await client.call_tool("search_memory", {"query": "Rome", "filters": {"colour": "red"}})
    return seen


def _check(seen: dict[str, Any]) -> None:
    assert set(seen["tools"]) == TOOLS
    search_schema = seen["tools"]["search_memory"].input_schema
    assert "namespace" not in search_schema["properties"] and search_schema["additionalProperties"] is False
    assert seen["remember"] == {"written": 2}
    assert seen["search"]["status"] == "ok" and seen["search"]["results"][0]["id"] == "rome"
    assert "Rome" in seen["search"]["context"]
    assert seen["prefetch"]["job_id"]
    context = seen["get_context"]
    assert context["ready"] and context["results"][0]["id"] == "anna" and not context["stale"]
    assert seen["forget"] == {"deleted": 1}
    assert seen["after_forget"]["stale"]  # a memory was deleted since it was computed
    for name, field in (("bad", "memories.0.content_body"), ("other_namespace", "namespace"),
                        ("bad_filter", "filters.colour")):
        result = seen[name]
        assert result.is_error and field in result.content[0].text, (name, result.content[0].text)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_over_stdio(env, start_workers, worker_class):
    start_workers(1, "--worker-class", worker_class)
    server = StdioServerParameters(command=sys.executable, args=["-m", "ferret.cli.main", "mcp", "-n", "kitchen"],
                                   env=env)

    async def play() -> dict[str, Any]:
        async with Client(server) as client:
            return await _exercise(client)

    _check(asyncio.run(play()))


def test_over_streamable_http(env, start_workers, redis_client):
    start_workers(1)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "mcp", "-n", "kitchen", "--transport",
                               "http", "--port", str(port)], env=env)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(100):
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)

        async def play() -> dict[str, Any]:
            async with Client(url) as client:
                return await _exercise(client)

        seen = asyncio.run(play())
        _check(seen)
        assert not any(key.startswith(b"ferret:ns:other") for key in redis_client.scan_iter(b"ferret:ns:other*"))
    finally:
        server.terminate()
        server.wait(10)


def test_http_listens_on_loopback_only(env):
    refused = subprocess.run([sys.executable, "-m", "ferret.cli.main", "mcp", "-n", "kitchen", "--transport", "http",
                              "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--host: 0.0.0.0 is not a loopback address" in refused.stderr


def test_http_closes_slow_and_idle_connections(env):
    """Slow-loris sockets (a request head sent a byte at a time, never finished) and sockets that send nothing
    are closed once --head-timeout passes; a real request made meanwhile is answered."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "mcp", "-n", "kitchen", "--transport",
                               "http", "--port", str(port), "--head-timeout", "1"], env=env)
    sockets: list[socket.socket] = []
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        assert wait_until(lambda: _answers(url), 60)
        for n in range(200):
            sock = socket.create_connection(("127.0.0.1", port))
            if n % 2:
                sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finished
            sockets.append(sock)
        assert _answers(url)  # the server still serves
        assert wait_until(lambda: all(closed_by_the_server(s) for s in sockets), 60)
    finally:
        for sock in sockets:
            sock.close()
        server.terminate()
        server.wait(10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code > 0
    except httpx.TransportError:
        return False
