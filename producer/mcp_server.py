"""``ferret mcp``: Ferret's memory as Model Context Protocol tools, for one namespace.

Built on the official ``mcp`` SDK (the ``mcp`` extra): stdio, or streamable
HTTP on a loopback address. Every tool goes through the queue like any
producer (``AsyncClient``): the workers do the searching, with their
deadlines, cache and metrics.

Tools: ``search_memory`` (query, filters, deadline, max results, history:
the formatted context and the results), ``remember``, ``forget``,
``prefetch`` and ``get_context`` (a conversation's freshest prefetched
context). Their input schemas come from Ferret's pydantic models; a bad
argument is a tool error naming the field, an argument no tool has
(``namespace`` among them) is refused.

The namespace is fixed when the server starts (``--namespace``): it is a
boundary, not an argument a model can change. Each tool declares what it
does (``ferret.serve.access``: read, or write memories) and asks
``MemoryTools.authorize`` before it runs; a tool that declares nothing is not
served. ``--read-only`` serves the reading tools only to a model that would
write.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ferret.contract import Turn
from ferret.errors import FerretError, InvalidRequest, ResultTimeout
from ferret.producer.api import AsyncClient
from ferret.records import Filters, Memory
from ferret.serve.access import Action, needs, undeclared

T = TypeVar("T")

WAIT_GRACE_SECONDS = 5.0  # a search waits its deadline plus this for the worker's answer


def _refuse_other_arguments(server: MCPServer) -> None:
    """Tools take only their own arguments: an unknown one (``namespace`` above all) is refused.
    The SDK's argument models ignore extra keys; each tool's model is made strict here."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public switch
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters = model.model_json_schema(by_alias=True)


def _context_answer(result: Any) -> dict[str, Any]:
    return {"job_id": result.job_id, "status": result.status, "error": result.error, "context": result.context,
            "results": [item.model_dump(mode="json") for item in result.results]}


def build_server(namespace: str, client: Callable[[], AsyncClient], tools: MemoryTools | None = None,
                 read_only: bool = False) -> MCPServer:
    """The MCP server for ``namespace``; ``client`` gives the shared ``AsyncClient`` (made on the
    server's event loop, at the first call). ``tools``: tools that find their namespace elsewhere
    (``ferret serve`` takes it from the caller's key). ``read_only``: the writing tools refuse."""
    server = MCPServer(
        name="ferret", title="Ferret memory",
        instructions=f"Long-term memory of {'namespace ' + repr(namespace) if tools is None else namespace}: "
                     "search_memory before answering from "
                     "memory, remember what is worth keeping, prefetch for the next turn, get_context to read it.")
    tools = tools or MemoryTools(namespace, client, read_only)
    served = (tools.search_memory, tools.remember, tools.forget, tools.prefetch, tools.get_context)
    if undeclared(served):
        raise RuntimeError(f"MCP tools that declare no action (ferret.serve.access): {undeclared(served)}")
    for tool in served:
        server.tool()(tool)
    _refuse_other_arguments(server)
    return server


def _guarded(action: Action) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """A tool that does ``action``: asked of ``authorize`` first; Ferret's errors as tool errors
    (InvalidRequest names its field; the others say what went wrong)."""
    def guard(tool: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(tool)
        async def guarded(self: MemoryTools, *args: Any, **kwargs: Any) -> T:
            self.authorize(action)
            try:
                return await tool(self, *args, **kwargs)
            except FerretError as exc:
                raise ToolError(str(exc)) from None
        return needs(action)(guarded)
    return guard


class MemoryTools:
    """The tools of one namespace, each a call of the shared ``AsyncClient``."""

    def __init__(self, namespace: str, client: Callable[[], AsyncClient], read_only: bool = False) -> None:
        self.namespace = namespace
        self.client = client
        self.read_only = read_only

    def authorize(self, action: Action) -> None:
        """Nothing when the tool may run; else a ``ToolError`` saying why."""
        if action is Action.WRITE and self.read_only:
            raise ToolError("read_only: this server is read-only (--read-only): it cannot write or delete memories")

    @_guarded(Action.READ)
    async def search_memory(
        self,
        query: Annotated[str, Field(description="What to look for, in the user's words.")],
        filters: Annotated[Filters | None, Field(description="Only memories of this type, subtype, "
                                                             "lifecycle, time range or cluster.")] = None,
        deadline_seconds: Annotated[float | None, Field(gt=0, le=300, description="Seconds the search "
                                                        "may take (default: the service's).")] = None,
        max_results: Annotated[int | None, Field(ge=1, le=100, description="Cap on results.")] = None,
        history: Annotated[list[Turn] | None, Field(description="Recent turns, for a follow-up question.")] = None,
    ) -> dict[str, Any]:
        """Search the memory: the context to inject (formatted) and the results with their scores."""
        ferret = self.client()
        request: dict[str, Any] = {"query": query, "namespace": self.namespace, "queue": "prefetch",
                                   "filters": (filters or Filters()).model_dump(mode="json", exclude_none=True),
                                   "options": {"max_results": max_results} if max_results else {},
                                   "history": [turn.model_dump(mode="json") for turn in history or ()]}
        if deadline_seconds is not None:
            request["deadline_seconds"] = deadline_seconds
        handle = await ferret.enqueue(request)
        wait = (handle.deadline_at - await ferret.clock.time()) if handle.deadline_at else 30.0
        try:
            return _context_answer(await ferret.wait(handle, max(1.0, wait) + WAIT_GRACE_SECONDS))
        except ResultTimeout as exc:
            raise ToolError(f"no answer in time: {exc}") from None

    @_guarded(Action.WRITE)
    async def remember(
        self,
        memories: Annotated[list[Memory], Field(min_length=1, max_length=1000,
                                                description="Memories to write (an existing id is replaced).")],
    ) -> dict[str, int]:
        """Write memories (visible to the next search)."""
        return {"written": await self.client().remember(self.namespace, memories)}

    @_guarded(Action.WRITE)
    async def forget(
        self,
        ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]],
                       Field(min_length=1, max_length=1000, description="Ids of the memories to delete.")],
    ) -> dict[str, int]:
        """Delete memories by id."""
        return {"deleted": await self.client().forget(self.namespace, ids)}

    @_guarded(Action.READ)
    async def prefetch(
        self,
        conversation: Annotated[str, Field(min_length=1, max_length=256, description="The conversation's id.")],
        query: Annotated[str, Field(description="What the next turn will likely need.")],
        history: Annotated[list[Turn] | None, Field(description="Recent turns.")] = None,
    ) -> dict[str, Any]:
        """Start fetching context for the conversation's next turn in the background (a newer prefetch
        replaces one still queued); read it with get_context."""
        handle = await self.client().prefetch(self.namespace, conversation, query,
                                              history=[turn.model_dump(mode="json") for turn in history or ()])
        return {"job_id": handle.job_id, "joined_identical_request": handle.coalesced}

    @_guarded(Action.READ)
    async def get_context(
        self,
        conversation: Annotated[str, Field(min_length=1, max_length=256, description="The conversation's id.")],
    ) -> dict[str, Any]:
        """The conversation's freshest prefetched context: how old it is, whether memories were written
        since (stale), whether a newer prefetch is still running. ``context`` is null when none is ready."""
        found = await self.client().context_for(self.namespace, conversation)
        if found is None:
            return {"context": None, "ready": False}
        return {**_context_answer(found.result), "ready": True, "age_seconds": round(found.age_seconds, 3),
                "stale": found.stale, "newer_pending": found.newer_pending}


def check_loopback(host: str) -> None:
    """The HTTP transport has no authentication: it listens on loopback only."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise InvalidRequest("--host", f"{host} is not a loopback address: the MCP server has no authentication "
                                       "and listens on loopback only (127.0.0.1, ::1, localhost); put an "
                                       "authenticating proxy in front to reach it from elsewhere")
