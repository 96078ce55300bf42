"""Seed 002's ReAct loop, under the job's deadline.

THINK (an LLM call: a thought and one or two actions) -> a terminal action
ends the run (``final_answer`` names the memories to return,
``ask_clarification`` asks back) -> ACT (one tool, or two at once) -> a
dead end (every tool failed or found nothing) rolls the step back and gives
the next THINK a hint, once per run -> OBSERVE (the memories join those
gathered) and REFLECT (an LLM call: can it be answered now?) -> a reflection
that says ``ACTION: final_answer`` is binding: the loop ends through the
conclusion call. After ``max_steps`` the conclusion is forced. Prompts
carry the last two steps in full and only thought + action of older ones.
A step that only repeats actions already taken (the same tool, the same
arguments: small models loop) is not run again: the run answers with what
the fast path and the earlier steps found (``stats.repeated_action``; the
fast path's hits first, in its order), without another call.
Every answer that needed repairing to be read adds to
``stats.parse_repairs`` (``ferret.worker.agent.protocol``).

Every LLM call gets at most ``agent.timeout_seconds`` and never more than
the job's time left less ``agent.result_reserve_seconds``. Running out of
that time ends the run ``deadline`` (the job is ``partial``, with what the
fast path and the steps so far found). Any other failure (endpoint down,
timeout, malformed answers, no time to start) raises ``AgentFailed`` and
the job keeps the fast path's answer (``fallback``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ferret.errors import AgentFailed
from ferret.records import Filters, Hit
from ferret.settings import AgentSettings
from ferret.tracing import NoopTracer, Tracer
from ferret.worker.agent import prompts
from ferret.worker.agent.protocol import TERMINAL, Decision, ToolCall, concludes, parse_decision
from ferret.worker.agent.tools import ToolResult, Tools, run_parallel_tools
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.parallel import TimedOut, call_with_timeout

KEEP_FULL_STEPS = 2
Chat = Callable[[list[dict[str, str]], float], str]  # (messages, timeout) -> reply text


def empty_stats(outcome: str) -> dict[str, Any]:
    """``stats.agent`` of a run that took no step: every field it always has."""
    return {"outcome": outcome, "steps": 0, "parallel_steps": 0, "backtracked": False, "reflection_concluded": False,
            "forced_conclusion": False, "llm_calls": 0, "llm_answers": 0, "llm_ms": [], "parse_repairs": 0}


def _signature(action: ToolCall) -> str:
    return action.name + json.dumps(action.arguments, sort_keys=True, ensure_ascii=False, default=str).lower()


class _OutOfTime(Exception):
    """The job's deadline (less the reserve) came: the run ends ``deadline``."""


@dataclass
class _Step:
    thought: str
    actions: tuple[ToolCall, ...]
    observation: str = ""
    reflection: str = ""

    def full(self, number: int) -> str:
        acts = "; ".join(a.describe() for a in self.actions)
        return (f"Step {number}: THOUGHT: {self.thought}\nACTION: {acts}\nOBSERVATION: {self.observation[:1000]}"
                f"\nREFLECTION: {self.reflection[:500]}")

    def short(self, number: int) -> str:
        return f"Step {number}: THOUGHT: {self.thought[:300]}\nACTION: " + "; ".join(a.describe() for a in self.actions)


@dataclass
class AgentOutcome:
    outcome: str  # ok | clarification | deadline
    hits: tuple[Hit, ...]  # the memories chosen (ok) or everything found so far (deadline)
    searches: tuple[str, ...]  # the questions the tools searched, in order (hits' sub_query indexes into these)
    stats: dict[str, Any] = field(default_factory=dict)
    seed_ids: frozenset[str] = frozenset()  # hits that are the fast path's (their sub_query is the fast path's)


class _TracedTools:
    """The tools, each call in a span of its own under the step's (tools may run on other threads)."""

    def __init__(self, tools: Tools, tracer: Tracer, parent: str, record_text: bool) -> None:
        self.tools, self.tracer, self.parent, self.record_text = tools, tracer, parent, record_text

    def run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        shown = {"arguments": ToolCall(name, arguments).describe()[:300]} if self.record_text else {}
        with self.tracer.span("agent.tool", parent=self.parent, tool=name, **shown) as span:
            result = self.tools.run(name, arguments)
            span.set(success=result.success, hits=len(result.hits), dead_end=result.dead_end)
        return result


class AgentLoop:
    def __init__(self, settings: AgentSettings, chat: Chat, search: Callable[[str, Filters | None], list[Hit]],
                 budget: Budget, tracer: Tracer | None = None, record_text: bool = True) -> None:
        self.settings = settings
        self.chat = chat
        self.budget = budget
        self.tracer = tracer or NoopTracer()
        self.record_text = record_text
        self.steps: list[_Step] = []
        self.gathered: dict[str, Hit] = {}
        self.searches: list[str] = []
        self.taken: set[str] = set()  # every action run so far, as name + arguments
        self.seeded: list[str] = []  # the fast path's hits, in its order
        self.tools = Tools(self._search_recorded(search), lambda: self.gathered, settings.preview_chars)
        self.stats: dict[str, Any] = empty_stats("ok")

    # -- plumbing -------------------------------------------------------------------------------------------------

    def _search_recorded(self, search: Callable[[str, Filters | None], list[Hit]]
                         ) -> Callable[[str, Filters | None], list[Hit]]:
        def searched(query: str, filters: Filters | None) -> list[Hit]:
            if self.budget.remaining() <= self.settings.result_reserve_seconds:
                raise _OutOfTime()
            hits = search(query, filters)
            self.searches.append(query)
            index = len(self.searches) - 1
            return [replace(h, sub_query=index) for h in hits]
        return searched

    def _ask(self, purpose: str, messages: list[dict[str, str]]) -> str:
        """One LLM call, bounded by its timeout and the job's time left."""
        left = self.budget.remaining() - self.settings.result_reserve_seconds
        if left <= 0.05:
            raise _OutOfTime()
        bound = min(self.settings.timeout_seconds, left)
        cut_by_deadline = bound < self.settings.timeout_seconds
        started = time.monotonic()
        with self.tracer.span("agent.llm", purpose=purpose) as span:
            try:
                answer = call_with_timeout(lambda: self.chat(messages, bound), bound)
            except AgentFailed as exc:
                if exc.reason == "timeout" and cut_by_deadline:
                    raise _OutOfTime() from exc
                raise
            finally:
                self.stats["llm_calls"] += 1
                self.stats["llm_ms"].append(round((time.monotonic() - started) * 1000, 1))
            if isinstance(answer, TimedOut):
                if cut_by_deadline:
                    raise _OutOfTime()
                raise AgentFailed("timeout", f"no {purpose} answer within {bound:.2f}s")
            self.stats["llm_answers"] += 1
            span.set(chars=len(answer))
        return answer

    def _history(self) -> str:
        first_full = len(self.steps) - KEEP_FULL_STEPS
        return "\n".join(step.full(n + 1) if n >= first_full else step.short(n + 1)
                         for n, step in enumerate(self.steps))

    def _gathered_text(self) -> str:
        ranked = sorted(self.gathered.values(), key=lambda h: h.score, reverse=True)
        return prompts.memory_lines(ranked, self.settings.preview_chars)

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, query: str, seed_hits: tuple[Hit, ...] = ()) -> AgentOutcome:
        """``seed_hits``: what the fast path found (shown to the agent, and kept at a deadline)."""
        for hit in seed_hits:
            self.gathered.setdefault(hit.id, hit)
        self.seeded = [hit.id for hit in seed_hits]
        with self.tracer.span("agent", max_steps=self.settings.max_steps) as span:
            try:
                outcome = self._loop(query)
            except _OutOfTime:
                self.stats["outcome"] = "deadline"
                outcome = AgentOutcome("deadline", tuple(self.gathered.values()), tuple(self.searches))
            span.set(outcome=outcome.outcome, steps=self.stats["steps"], llm_calls=self.stats["llm_calls"])
        outcome.stats = self.stats
        outcome.seed_ids = frozenset(h.id for h in seed_hits)
        return outcome

    def _loop(self, query: str) -> AgentOutcome:
        hint: str | None = None
        for number in range(1, self.settings.max_steps + 1):
            self.stats["steps"] = number
            with self.tracer.span("agent.step", index=number) as step_span:
                decision = self._think(query, hint)
                hint = None
                if self.record_text:
                    step_span.set(thought=decision.thought[:500])
                step_span.set(actions=[a.name for a in decision.actions])
                terminal = decision.actions[0] if decision.actions[0].name in TERMINAL else None
                if terminal is not None:
                    return self._terminal(terminal)
                signatures = [_signature(a) for a in decision.actions]
                if all(s in self.taken for s in signatures):
                    self.stats["repeated_action"] = decision.actions[0].describe()[:200]
                    step_span.set(repeated=True)
                    return self._final(ToolCall("final_answer", {}))
                self.taken.update(signatures)
                results = self._act(decision)
                if all(r.dead_end for r in results) and not self.stats["backtracked"]:
                    self.stats["backtracked"] = True  # the step is not kept: its context is rolled back
                    hint = "; ".join(f"{a.describe()} -> {r.observation.splitlines()[0][:200]}"
                                     for a, r in zip(decision.actions, results, strict=True))
                    step_span.set(backtracked=True)
                    continue
                step = _Step(decision.thought, decision.actions,
                             "\n".join(f"[{a.name}] {r.observation}"
                                       for a, r in zip(decision.actions, results, strict=True)))
                for result in results:
                    for hit in result.hits:
                        self.gathered.setdefault(hit.id, hit)
                self.steps.append(step)
                step.reflection = self._ask("reflect", prompts.reflect(query, self._history(), self._gathered_text(),
                                                                       step.observation))
                if concludes(step.reflection):
                    self.stats["reflection_concluded"] = True
                    return self._conclude(query)
        self.stats["forced_conclusion"] = True
        return self._conclude(query)

    def _decide(self, purpose: str, messages: list[dict[str, str]]) -> Decision:
        decision = parse_decision(self._ask(purpose, messages))
        self.stats["parse_repairs"] += len(decision.repairs)
        return decision

    def _think(self, query: str, hint: str | None) -> Decision:
        messages = prompts.think(query, self._history(), self._gathered_text(), hint)
        decision = self._decide("think", messages)
        if not decision.actions:  # once more, saying what was wrong; then it is malformed
            messages.append({"role": "user", "content": "Your answer had no ACTION. Answer in the format asked."})
            decision = self._decide("think", messages)
            if not decision.actions:
                raise AgentFailed("malformed", "the answer had no ACTION twice")
        return decision

    def _act(self, decision: Decision) -> list[ToolResult]:
        if len(decision.actions) > 1:
            self.stats["parallel_steps"] += 1

        with self.tracer.span("agent.tools", tools=[a.name for a in decision.actions]) as span:
            parent = span.span_id
            traced = _TracedTools(self.tools, self.tracer, parent, self.record_text)
            results = run_parallel_tools(traced, [(a.name, a.arguments) for a in decision.actions])
            span.set(dead_ends=sum(r.dead_end for r in results))
        if self.budget.remaining() <= self.settings.result_reserve_seconds:
            raise _OutOfTime()
        return results

    def _terminal(self, action: ToolCall) -> AgentOutcome:
        if action.name == "ask_clarification":
            question = action.arguments.get("question") or next(
                (v for v in action.arguments.values() if isinstance(v, str)), "")
            self.stats["outcome"] = "clarification"
            self.stats["clarification"] = str(question)[:500]
            return AgentOutcome("clarification", (), tuple(self.searches))
        return self._final(action)

    def _final(self, action: ToolCall) -> AgentOutcome:
        raw = action.arguments.get("memory_ids") or action.arguments.get("ids") or []
        ids = [part.strip() for part in raw.split(",")] if isinstance(raw, str) else raw
        chosen = tuple(self.gathered[i] for i in dict.fromkeys(ids) if isinstance(i, str) and i in self.gathered)
        if not chosen:  # named nothing it found: the fast path's answer in its order, then what the steps added
            seeded = set(self.seeded)
            added = sorted((h for i, h in self.gathered.items() if i not in seeded), key=lambda h: h.score,
                           reverse=True)
            chosen = (*(self.gathered[i] for i in self.seeded), *added)
            self.stats["chosen"] = "all_found"
        reason = action.arguments.get("reason")
        if isinstance(reason, str) and self.record_text:
            self.stats["reason"] = reason[:500]
        return AgentOutcome("ok", chosen, tuple(self.searches))

    def _conclude(self, query: str) -> AgentOutcome:
        decision = self._decide("conclude", prompts.conclude(query, self._history(), self._gathered_text()))
        final = next((a for a in decision.actions if a.name == "final_answer"), None)
        if final is None:
            raise AgentFailed("malformed", "the conclusion named no final_answer")
        return self._final(final)
