"""``ferret bench llm``: the LLM stages against a real model, on a fixed LoCoMo sample.

- re-rank: single questions, the pipeline without and with the LLM re-rank
  (seed 004): R@5 / R@10, calls and seconds per question;
- agent: compound questions (and single ones the pipeline routes COMPLEX),
  the fast path alone vs the agent loop (seed 002) under a per-job deadline:
  R@10 of the memories the job returns, all@10 for compound ones, outcomes
  with reasons, steps, parse repairs, LLM calls and seconds.

Every comparison is paired over questions: the mean difference with a 95%
bootstrap interval and a two-sided sign test. Per-question rows go to the
JSON. The model is slow on a CPU, so the sample is small and fixed (seeded).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ferret.bench.locomo import CompoundQuery, Dataset, Question
from ferret.contract import parse_request
from ferret.settings import Settings
from ferret.tracing import NoopTracer
from ferret.worker.agent.job import agent_chat, run_agent
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.llm.chat import ChatClient
from ferret.worker.llm.reranker import LLMScorer
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.rerank import Reranking

BOOTSTRAP_ROUNDS = 2000
CALLED = ("ok", "timeout", "error", "malformed")  # re-rank outcomes of a call made (not too_few, deadline, ...)


def _recall(ids: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(ids[:k])) / len(evidence)


def paired(differences: Sequence[float], seed: int = 7) -> dict[str, Any]:
    """Mean difference (after - before) with a 95% bootstrap interval over questions, and a two-sided sign
    test over the questions where the two differ."""
    n = len(differences)
    if not n:
        return {"n": 0}
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(differences, k=n)) for _ in range(BOOTSTRAP_ROUNDS))
    wins, losses = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
    tried = wins + losses
    tail = sum(math.comb(tried, k) for k in range(min(wins, losses) + 1)) / 2 ** tried if tried else 1.0
    low, high = means[int(0.025 * BOOTSTRAP_ROUNDS)], means[int(0.975 * BOOTSTRAP_ROUNDS) - 1]
    return {"n": n, "mean": round(statistics.fmean(differences), 4), "ci95": [round(low, 4), round(high, 4)],
            "wins": wins, "losses": losses, "ties": n - tried, "sign_test_p": round(min(1.0, 2 * tail), 4)}


def sample(items: Sequence[Any], count: int, seed: int) -> list[Any]:
    return random.Random(seed).sample(list(items), min(count, len(items)))


def rerank_rows(dataset: Dataset, questions: Sequence[Question], settings: Settings,
                progress: Callable[[int], None] = lambda n: None) -> list[dict[str, Any]]:
    """Each question without and with the re-rank (its own timeout, no job deadline)."""
    backends = {name: InMemoryBackend(memories) for name, memories in dataset.memories.items()}
    scorer = LLMScorer(settings.rerank, ChatClient(settings.rerank))
    reranking = Reranking(settings.rerank, scorer)
    rows = []
    try:
        for question in questions:
            backend = backends[question.conversation]
            plain = run_pipeline(question.text, backend, settings.pipeline)
            started = time.monotonic()
            ranked = run_pipeline(question.text, backend, settings.pipeline, reranking=reranking, rerank=True,
                                  budget=Budget.of_seconds(settings.rerank.timeout_seconds + 5))
            seconds = time.monotonic() - started
            before, after = [h.id for h in plain.hits], [h.id for h in ranked.hits]
            rows.append({"conversation": question.conversation, "question": question.text,
                         "evidence": sorted(question.evidence), "outcome": ranked.stats.answer.rerank,
                         "seconds": round(seconds, 3), "calls": int(ranked.stats.answer.rerank in CALLED),
                         **{f"r@{k}_{name}": _recall(ids, question.evidence, k)
                            for k in (5, 10) for name, ids in (("plain", before), ("rerank", after))}})
            progress(1)
    finally:
        scorer.close()
    return rows


def agent_rows(dataset: Dataset, jobs: Sequence[Question | CompoundQuery], settings: Settings, deadline: float,
               progress: Callable[[int], None] = lambda n: None) -> list[dict[str, Any]]:
    """Each question through the fast path, then the agent (asked for, whatever the route) under ``deadline``."""
    backends = {name: InMemoryBackend(memories) for name, memories in dataset.memories.items()}
    chat = agent_chat(settings.agent)
    rows = []
    try:
        for job in jobs:
            backend = backends[job.conversation]
            request = parse_request({"query": job.text, "options": {"agent": True}}, settings.limits)
            budget = Budget.of_seconds(deadline)
            started = time.monotonic()
            fast = run_pipeline(job.text, backend, settings.pipeline, budget=budget)
            answer = run_agent(settings, chat, request, backend, fast, budget, NoopTracer(), True)
            seconds = time.monotonic() - started
            parts = job.parts if isinstance(job, CompoundQuery) else (job.evidence,)
            fast_ids, agent_ids = [h.id for h in fast.hits], [h.id for h in answer.hits]
            stats = answer.stats
            rows.append({
                "conversation": job.conversation, "question": job.text, "compound": len(parts) > 1,
                "route": fast.stats.plan.route, "outcome": stats.get("outcome"), "reason": stats.get("reason"),
                "repeated_action": stats.get("repeated_action"), "steps": stats.get("steps", 0),
                "parse_repairs": stats.get("parse_repairs", 0), "llm_calls": stats.get("llm_calls", 0),
                "llm_seconds": round(sum(stats.get("llm_ms", [])) / 1000, 3), "seconds": round(seconds, 3),
                "within_deadline": seconds <= deadline + 0.5,
                "r@10_fast": _recall(fast_ids, frozenset().union(*parts), 10),
                "r@10_agent": _recall(agent_ids, frozenset().union(*parts), 10),
                "all@10_fast": float(all(p & set(fast_ids[:10]) for p in parts)),
                "all@10_agent": float(all(p & set(agent_ids[:10]) for p in parts)),
            })
            progress(1)
    finally:
        chat.close()
    return rows


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def _mean_of(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return round(statistics.fmean(r[key] for r in rows), 4) if rows else None


def summarise(rerank: Sequence[dict[str, Any]], agent: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rerank:
        out["rerank"] = {
            "n": len(rerank),
            **{f"{m}_{name}": round(statistics.fmean(r[f"{m}_{name}"] for r in rerank), 4)
               for m in ("r@5", "r@10") for name in ("plain", "rerank")},
            "r@5_paired": paired([r["r@5_rerank"] - r["r@5_plain"] for r in rerank]),
            "r@10_paired": paired([r["r@10_rerank"] - r["r@10_plain"] for r in rerank]),
            "outcomes": dict(Counter(r["outcome"] for r in rerank)),
            "calls_per_question": round(statistics.fmean(r["calls"] for r in rerank), 3),
            "median_seconds": _median([r["seconds"] for r in rerank]),
        }
    if agent:
        compound = [r for r in agent if r["compound"]]
        out["agent"] = {
            "n": len(agent), "compound": len(compound),
            "r@10_fast": round(statistics.fmean(r["r@10_fast"] for r in agent), 4),
            "r@10_agent": round(statistics.fmean(r["r@10_agent"] for r in agent), 4),
            "r@10_paired": paired([r["r@10_agent"] - r["r@10_fast"] for r in agent]),
            "all@10_fast_compound": _mean_of(compound, "all@10_fast"),
            "all@10_agent_compound": _mean_of(compound, "all@10_agent"),
            "outcomes": dict(Counter(r["outcome"] for r in agent)),
            "fallback_rate": round(sum(r["outcome"] == "fallback" for r in agent) / len(agent), 4),
            "all_within_deadline": all(r["within_deadline"] for r in agent),
            "repeated_actions": sum(bool(r["repeated_action"]) for r in agent),
            "median_steps": _median([r["steps"] for r in agent]),
            "parse_repairs_per_run": round(statistics.fmean(r["parse_repairs"] for r in agent), 3),
            "median_llm_calls": _median([r["llm_calls"] for r in agent]),
            "median_seconds": _median([r["seconds"] for r in agent]),
            "median_llm_seconds": _median([r["llm_seconds"] for r in agent]),
            "reasons": sorted({r["reason"] for r in agent if r["reason"] and r["outcome"] != "ok"}),
        }
    return out


def markdown(summary: dict[str, Any]) -> str:
    lines = []
    rerank = summary.get("rerank")
    if rerank:
        p5, p10 = rerank["r@5_paired"], rerank["r@10_paired"]
        lines += [f"re-rank, {rerank['n']} single questions:", "",
                  "| | R@5 | R@10 |", "|---|---|---|",
                  f"| no re-rank | {rerank['r@5_plain']:.3f} | {rerank['r@10_plain']:.3f} |",
                  f"| LLM re-rank | {rerank['r@5_rerank']:.3f} | {rerank['r@10_rerank']:.3f} |",
                  f"| difference (95% CI; sign test p) | {p5['mean']:+.3f} ({p5['ci95'][0]:+.3f}..{p5['ci95'][1]:+.3f};"
                  f" p {p5['sign_test_p']}) | {p10['mean']:+.3f} ({p10['ci95'][0]:+.3f}..{p10['ci95'][1]:+.3f}; "
                  f"p {p10['sign_test_p']}) |", "",
                  f"outcomes {rerank['outcomes']}; {rerank['calls_per_question']} calls per question, median "
                  f"{rerank['median_seconds']} s a question", ""]
    agent = summary.get("agent")
    if agent:
        p = agent["r@10_paired"]
        lines += [f"agent, {agent['n']} questions ({agent['compound']} compound):", "",
                  "| | R@10 | all@10 (compound) |", "|---|---|---|",
                  f"| fast path | {agent['r@10_fast']:.3f} | {agent['all@10_fast_compound']} |",
                  f"| agent | {agent['r@10_agent']:.3f} | {agent['all@10_agent_compound']} |",
                  f"| difference (95% CI; sign test p) | {p['mean']:+.3f} ({p['ci95'][0]:+.3f}..{p['ci95'][1]:+.3f}; "
                  f"p {p['sign_test_p']}) | |", "",
                  f"outcomes {agent['outcomes']} (fallback rate {agent['fallback_rate']}); every run within its "
                  f"deadline: {agent['all_within_deadline']}; repeated actions stopped: {agent['repeated_actions']}; "
                  f"median steps {agent['median_steps']}, parse repairs per run {agent['parse_repairs_per_run']}, "
                  f"LLM calls {agent['median_llm_calls']}, seconds {agent['median_seconds']} "
                  f"(in LLM calls {agent['median_llm_seconds']})"]
        if agent["reasons"]:
            lines += ["", "reasons: " + "; ".join(agent["reasons"])]
    return "\n".join(lines)
