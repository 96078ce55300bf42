"""The access rule, the wrong-key limiter and the build's refusal of a route or tool that declares nothing
(no Redis: the rules alone)."""

from __future__ import annotations

import fakeredis
import pytest
from fastapi import APIRouter

from ferret.serve import access, routes
from ferret.serve.access import Action, Refused, authorize, needs
from ferret.serve.api_keys import ApiKey
from ferret.serve.failed_keys import FailedKeys
from ferret.settings import Settings


def _key(*namespaces: str, read_only: bool = False) -> ApiKey:
    return ApiKey("0123456789abcdef", namespaces, read_only, None, "", 0.0, None)


@pytest.mark.parametrize("action", list(Action))
def test_a_key_acts_only_in_its_namespaces(action):
    authorize(_key("alice"), "alice", action)
    with pytest.raises(Refused) as refused:
        authorize(_key("alice"), "bob", action)
    assert (refused.value.status, refused.value.reason) == (403, "other_namespace")


def test_a_read_only_key_reads_and_never_writes():
    authorize(_key("alice", read_only=True), "alice", Action.READ)
    with pytest.raises(Refused) as refused:
        authorize(_key("alice", read_only=True), "alice", Action.WRITE)
    assert (refused.value.status, refused.value.reason) == (403, "read_only")


def test_wrong_keys_past_the_rate_are_refused_before_any_lookup():
    failed = FailedKeys("3/minute", "5/minute")
    for _ in range(3):
        assert failed.retry_after("id1", "10.0.0.1") is None
        failed.failed("id1", "10.0.0.1")
    wait = failed.retry_after("id1", "10.0.0.1")
    assert wait is not None and 1 <= wait <= 60
    assert failed.retry_after("id1", "10.0.0.2") is not None  # the key id is blocked from anywhere
    assert failed.retry_after("id2", "10.0.0.2") is None
    for _ in range(2):
        failed.failed("id2", "10.0.0.1")  # the address's fifth failure
    assert failed.retry_after("id3", "10.0.0.1") is not None  # the address is blocked for any key id
    assert failed.retry_after(None, "10.0.0.3") is None


class _Client:
    """What build_app takes of the Python client: its Redis client, and close()."""

    def __init__(self) -> None:
        self.client = fakeredis.FakeAsyncRedis()

    async def close(self) -> None:
        await self.client.aclose()


def test_a_route_that_declares_no_action_is_not_served(monkeypatch):
    from ferret.serve.app import build_app

    build_app(Settings(), _Client(), mcp=False)  # every route declares one
    extra = APIRouter(prefix="/v1/namespaces/{namespace}")

    @extra.get("/everything")
    async def everything(namespace: str) -> dict[str, str]:
        return {}

    monkeypatch.setattr(routes.router, "routes", [*routes.router.routes, *extra.routes])
    with pytest.raises(RuntimeError, match="everything"):
        build_app(Settings(), _Client(), mcp=False)


def test_a_tool_that_declares_no_action_is_not_served(monkeypatch):
    from ferret.producer.mcp_server import MemoryTools, build_server

    build_server("alice", lambda: None)  # type: ignore[arg-type,return-value]

    async def search_memory(query: str) -> dict[str, str]:
        return {}

    monkeypatch.setattr(MemoryTools, "search_memory", search_memory)
    with pytest.raises(RuntimeError, match="search_memory"):
        build_server("alice", lambda: None)  # type: ignore[arg-type,return-value]
    assert access.declared(needs(Action.READ)(search_memory)) is Action.READ
