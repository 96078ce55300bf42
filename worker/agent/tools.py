"""The agent's tools, fitted to a retrieval service: search memory (the
whole fast pipeline for one question), look up memories by id or entity,
compare two entities (two searches at once). ``final_answer`` and
``ask_clarification`` end the loop and are handled there.

A tool never raises: a failure is a result with ``success=False``. A result
is a dead end (seed 002's backtracking signal) when it failed, found
nothing, or named an entity nothing is known about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ferret.errors import FerretError, InvalidRequest
from ferret.records import Filters, Hit
from ferret.worker.agent.prompts import memory_lines

SearchFn = Callable[[str, Filters | None], Sequence[Hit]]
_PARALLEL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ferret-agent")  # module-level, as seed 002's
_COMPARE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ferret-compare")  # compare's own two searches


@dataclass(frozen=True)
class ToolResult:
    observation: str
    success: bool
    hits: tuple[Hit, ...] = ()
    searches: tuple[str, ...] = ()  # the questions it searched

    @property
    def dead_end(self) -> bool:
        return not self.success or not self.hits


def _text(arguments: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = arguments.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _filters(raw: Any) -> Filters | None:
    if raw in (None, {}, ""):
        return None
    if not isinstance(raw, dict):
        raise InvalidRequest("filters", "must be an object")
    try:
        return Filters.model_validate(raw)
    except ValueError as exc:
        raise InvalidRequest("filters", str(exc).splitlines()[0]) from None


class Tools:
    def __init__(self, search: SearchFn, known: Callable[[], dict[str, Hit]], preview_chars: int) -> None:
        self._search = search
        self._known = known  # every memory seen so far (the fast path's and the tools'), by id
        self.preview_chars = preview_chars

    def run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        try:
            if name == "search_memory":
                return self.search_memory(arguments)
            if name == "lookup_memory":
                return self.lookup_memory(arguments)
            if name == "compare_entities":
                return self.compare_entities(arguments)
            return ToolResult(f"unknown tool {name!r}", False)
        except FerretError as exc:
            return ToolResult(f"{name} failed: {exc}", False)

    def _found(self, what: str, query: str, filters: Filters | None) -> ToolResult:
        hits = tuple(self._search(query, filters))
        if not hits:
            return ToolResult(f"{what}: no memories found", True, (), (query,))
        return ToolResult(f"{what}: {len(hits)} memories\n{memory_lines(hits[:5], self.preview_chars, 1500)}",
                          True, hits, (query,))

    def search_memory(self, arguments: dict[str, Any]) -> ToolResult:
        query = _text(arguments, "query", "question", "q", "text")
        if query is None:
            return ToolResult("search_memory needs a query", False)
        return self._found(f"search_memory({query!r})", query, _filters(arguments.get("filters")))

    def lookup_memory(self, arguments: dict[str, Any]) -> ToolResult:
        ids = arguments.get("ids") or arguments.get("id") or arguments.get("memory_ids")
        if isinstance(ids, str):
            ids = [part.strip() for part in ids.split(",") if part.strip()]
        if isinstance(ids, list) and ids:
            known = self._known()
            hits = tuple(known[i] for i in ids if isinstance(i, str) and i in known)
            missing = [i for i in ids if not (isinstance(i, str) and i in known)]
            note = f"; unknown ids: {', '.join(map(str, missing))}" if missing else ""
            return ToolResult(f"lookup_memory: {len(hits)} memories{note}\n"
                              f"{memory_lines(hits, self.preview_chars, 1500)}", True, hits)
        entity = _text(arguments, "entity", "name", "query")
        if entity is None:
            return ToolResult("lookup_memory needs ids or an entity", False)
        found = self._found(f"lookup_memory({entity!r})", entity, None)
        about = tuple(h for h in found.hits if entity.lower() in f"{h.memory.content_title} "
                      f"{h.memory.content_body or ''} {h.memory.content_summary or ''}".lower())
        if not about:
            return ToolResult(f"lookup_memory: nothing is known about {entity!r}", True, (), found.searches)
        return ToolResult(f"lookup_memory({entity!r}): {len(about)} memories\n"
                          f"{memory_lines(about[:5], self.preview_chars, 1500)}", True, about, found.searches)

    def compare_entities(self, arguments: dict[str, Any]) -> ToolResult:
        pair = arguments.get("entities")
        a, b = (pair[0], pair[1]) if isinstance(pair, list) and len(pair) >= 2 else (
            _text(arguments, "a", "entity_a", "first"), _text(arguments, "b", "entity_b", "second"))
        if not (isinstance(a, str) and isinstance(b, str) and a and b):
            return ToolResult("compare_entities needs two entities: a and b", False)
        left, right = (_COMPARE.submit(self._found, f"about {x!r}", x, None) for x in (a, b))
        results = (left.result(), right.result())
        hits = tuple(h for r in results for h in r.hits)
        return ToolResult("\n".join(r.observation for r in results), all(r.success for r in results),
                          hits if all(r.hits for r in results) else (), tuple(q for r in results for q in r.searches))


class Runs(Protocol):
    def run(self, name: str, arguments: dict[str, Any]) -> ToolResult: ...


def run_parallel_tools(tools: Runs, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolResult]:
    """One or two tool calls; two run at once."""
    if len(calls) == 1:
        return [tools.run(*calls[0])]
    futures = [_PARALLEL.submit(tools.run, name, arguments) for name, arguments in calls]
    return [future.result() for future in futures]
