"""The agent path of a job: whether it runs, and what its outcome makes of
the fast path's answer.

It runs when ``agent.enabled`` and the request asks for it
(``options.agent``) or the query routed COMPLEX or AMBIGUOUS (with
``agent.on_complex_route``). The fast path has already answered: its results
are the agent's starting point and the fallback. ``ok``: the memories the
agent chose, formatted; ``clarification``: the fast path's answer, with the
agent's question in ``stats.agent``; ``deadline``: the job ends ``partial``
with what the fast path and the steps so far found; any failure:
``fallback``, the fast path's answer unchanged (and ``stats.agent.reason``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import httpx

from ferret.contract import RetrievalRequest
from ferret.errors import AgentFailed, BackendError
from ferret.records import Filters, Hit
from ferret.settings import AgentSettings, Settings
from ferret.tracing import Tracer
from ferret.worker.agent.loop import AgentLoop, empty_stats
from ferret.worker.agent.protocol import STOP
from ferret.worker.backends.base import Backend
from ferret.worker.llm.chat import ChatClient
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.complexity import Route
from ferret.worker.pipeline.formatting import format_context
from ferret.worker.pipeline.orchestrator import PipelineResult, run_pipeline
from ferret.worker.pipeline.sections import sections_for

AGENT_ROUTES = (Route.COMPLEX.value, Route.AMBIGUOUS.value)
OUTCOMES = ("ok", "clarification", "deadline", "fallback")


@dataclass(frozen=True)
class AgentAnswer:
    hits: tuple[Hit, ...]
    sub_queries: tuple[str, ...]
    context: str
    partial: bool
    stats: dict[str, Any]


def agent_chat(settings: AgentSettings, transport: httpx.BaseTransport | None = None) -> ChatClient:
    """The agent's chat client: its failures are ``AgentFailed``, and a step's answer ends before an
    observation the model would invent (``protocol.STOP``)."""
    return ChatClient(settings, transport, failure=AgentFailed, temperature=settings.temperature, stop=STOP)


def agent_wanted(settings: Settings, request: RetrievalRequest, route: str | None) -> bool:
    if not settings.agent.enabled:
        return False
    return request.options.agent or (settings.agent.on_complex_route and route in AGENT_ROUTES)


def _fallback(fast: PipelineResult, reason: str, stats: dict[str, Any]) -> AgentAnswer:
    return AgentAnswer(fast.hits, fast.sub_queries, fast.context, False,
                       {**stats, "outcome": "fallback", "reason": reason[:300]})


def run_agent(settings: Settings, chat: ChatClient | None, request: RetrievalRequest, backend: Backend,
              fast: PipelineResult, budget: Budget, tracer: Tracer, record_text: bool) -> AgentAnswer:
    if chat is None:
        return _fallback(fast, "the agent's chat client is not configured", empty_stats("fallback"))
    limit = request.options.max_results or settings.pipeline.max_results

    def search(query: str, filters: Filters | None) -> list[Hit]:
        found = run_pipeline(query, backend, settings.pipeline, filters=filters or request.filters, budget=budget,
                             max_results=limit, record_query=record_text,
                             use_remote_classifier=settings.backend.nous.use_remote_classifier)
        return list(found.hits)

    loop = AgentLoop(settings.agent, chat.complete, search, budget, tracer, record_text)
    try:
        outcome = loop.run(request.query, fast.hits)
    except (AgentFailed, BackendError) as exc:
        return _fallback(fast, str(exc), loop.stats)
    except Exception as exc:  # the agent is an extra: never the reason a job fails
        return _fallback(fast, f"internal error: {type(exc).__name__}: {exc}", loop.stats)
    if outcome.outcome == "clarification":
        return AgentAnswer(fast.hits, fast.sub_queries, fast.context, False, outcome.stats)
    offset = len(fast.sub_queries)
    hits = tuple(h if h.id in outcome.seed_ids else replace(h, sub_query=h.sub_query + offset)
                 for h in outcome.hits)[:limit]
    sub_queries = (*fast.sub_queries, *outcome.searches)
    return AgentAnswer(hits, sub_queries, format_context(hits, settings.pipeline.max_context_tokens,
                                                                  sections_for(settings.pipeline.sections)),
                       outcome.outcome == "deadline", outcome.stats)
