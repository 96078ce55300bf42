"""What a key may do, asked the same way by every route of the HTTP API and every MCP tool at ``/mcp``: with
no key, another namespace's key and a read-only key, each route and each tool is tried (the lists come from
the server itself, so a route or tool added later is tried too). A read-only key reads and never writes or
deletes, on either door."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from ferret.serve.access import Action, declared
from ferret.serve.routes import router
from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

PATH_VALUES = {"namespace": "alice", "job_id": "job-1", "conversation": "c1"}
BODIES = {  # a valid body for each route that takes one
    "query": {"query": "where do I fly", "wait_seconds": 0.2},
    "enqueue": {"query": "where do I fly"},
    "prefetch": {"query": "where do I fly"},
    "remember": {"memories": [{"id": "new", "content_body": "written by a read-only key"}]},
    "forget": {"ids": ["rome"]},
}
TOOL_ARGUMENTS = {
    "search_memory": {"query": "Rome", "deadline_seconds": 0.2},
    "remember": {"memories": [{"id": "new", "content_body": "written by a read-only key"}]},
    "forget": {"ids": ["rome"]},
    "prefetch": {"conversation": "c1", "query": "Rome"},
    "get_context": {"conversation": "c1"},
}
WRITING_TOOLS = {"remember", "forget"}


def _routes() -> list[tuple[str, str, Any, Action]]:
    found = []
    for route in router.routes:
        path = route.path.format(**PATH_VALUES)
        action = declared(route.endpoint)
        assert action is not None, route.path
        (method,) = route.methods
        found.append((method, path, BODIES.get(route.endpoint.__name__), action))
    return found


def _seeded(redis_client) -> None:
    redis_client.hset("ferret:ns:{alice}:memories", "rome", json.dumps({"id": "rome", "content_body": "Rome"}))


def _alice_ids(redis_client) -> set[bytes]:
    return set(redis_client.hkeys("ferret:ns:{alice}:memories"))


def test_every_route_asks_what_the_key_may_do(env, serve, redis_client):  # noqa: F811
    served = serve()
    reader = make_key(env, "-n", "alice", "--read-only")
    bob = make_key(env, "-n", "bob")
    routes = _routes()
    assert {path.rsplit("/", 1)[-1] for _, path, _, action in routes if action is Action.WRITE} == {"memories",
                                                                                                    "forget"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for method, path, body, action in routes:
            where = f"{method} {path}"
            answered = http.request(method, path, json=body)
            assert (answered.status_code, answered.json()["error"]["code"]) == (401, "no_key"), where
            answered = http.request(method, path, json=body, headers=bearer(bob))
            assert (answered.status_code, answered.json()["error"]["code"]) == (403, "other_namespace"), where
            before = _alice_ids(redis_client)
            answered = http.request(method, path, json=body, headers=bearer(reader))
            if action is Action.WRITE:
                assert (answered.status_code, answered.json()["error"]["code"]) == (403, "read_only"), where
                assert _alice_ids(redis_client) == before, where
            else:  # let through: what it gets is the route's own answer (no job, no result yet, no context)
                assert answered.status_code not in (401, 403), (where, answered.text)


async def _calls(url: str, key: str | None, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    async with httpx.AsyncClient(headers=bearer(key) if key else {}, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        return names, [await client.call_tool(name, arguments) for name, arguments in calls]


def test_every_mcp_tool_asks_what_the_key_may_do(env, serve, redis_client):  # noqa: F811
    served = serve()
    url = f"{served.url}/mcp"
    _seeded(redis_client)
    reader = make_key(env, "-n", "alice", "--read-only")
    bob = make_key(env, "-n", "bob")
    names, answers = asyncio.run(_calls(url, reader, list(TOOL_ARGUMENTS.items())))
    assert sorted(names) == sorted(TOOL_ARGUMENTS)  # every tool the server has is tried here
    for (name, _), answer in zip(TOOL_ARGUMENTS.items(), answers, strict=True):
        text = answer.content[0].text if answer.content else ""
        if name in WRITING_TOOLS:
            assert answer.is_error and "read_only: this key is read-only" in text, (name, text)
        else:
            assert "read_only" not in text and "other_namespace" not in text, (name, text)
    assert _alice_ids(redis_client) == {b"rome"}  # nothing written, nothing forgotten

    # another namespace's key acts in its own namespace only: alice's memory is untouched
    _, answers = asyncio.run(_calls(url, bob, [("forget", {"ids": ["rome"]})]))
    assert answers[0].structured_content == {"deleted": 0}
    assert _alice_ids(redis_client) == {b"rome"}
    refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "no_key"
    counted = httpx.get(f"{served.url}/metrics").text
    assert 'ferret_http_refusals_total{reason="read_only"} 2.0' in counted
