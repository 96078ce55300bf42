"""The agent's prompts (seed 002's THINK, REFLECT and conclusion prompts,
fitted to a retrieval service: the answer is a choice of memories)."""

from __future__ import annotations

from collections.abc import Sequence

from ferret.records import Hit
from ferret.worker.results_builder import preview

SYSTEM = """You find the memories that answer a question, by searching a memory store with tools.

Tools:
- search_memory: ARGUMENTS {"query": "...", "filters": {optional: "type", "subtype", "lifecycle", "cluster_ids"}}
  runs the full retrieval pipeline for one question.
- lookup_memory: ARGUMENTS {"ids": ["..."]} or {"entity": "..."}: memories by id, or about one entity.
- compare_entities: ARGUMENTS {"a": "...", "b": "..."}: searches both at once.
- final_answer: ARGUMENTS {"memory_ids": ["..."], "reason": "..."}: ends the run with the memories that answer.
- ask_clarification: ARGUMENTS {"question": "..."}: ends the run when the question cannot be understood.

Answer in this format:
THOUGHT: <your reasoning>
ACTION: <tool name>
ARGUMENTS: <JSON>

For two independent searches (comparing two things), use:
THOUGHT: <your reasoning>
ACTION_1: <tool name>
ARGUMENTS_1: <JSON>
ACTION_2: <tool name>
ARGUMENTS_2: <JSON>
final_answer and ask_clarification are always a single action.

Be efficient: 2-3 steps at most; one search is usually enough. Name only memory ids you were shown."""

_GATHERED_CHARS = 3000
_OBSERVATION_CHARS = 1000


def memory_lines(hits: Sequence[Hit], preview_chars: int, limit_chars: int = _GATHERED_CHARS) -> str:
    lines, used = [], 0
    for hit in hits:
        text = " ".join(preview(hit.memory).split())[:preview_chars]
        line = f"[{hit.id}] {hit.memory.content_title}: {text}"
        if used + len(line) > limit_chars:
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines) or "(none yet)"


def think(query: str, history: str, gathered: str, hint: str | None) -> list[dict[str, str]]:
    prompt = f"QUESTION: {query}\n\nMEMORIES FOUND SO FAR:\n{gathered}\n\nSTEPS SO FAR:\n{history or '(none)'}\n"
    if hint:
        prompt += f"\nIMPORTANT - PREVIOUS ATTEMPT FAILED:\n{hint}\nTry a DIFFERENT approach.\n"
    prompt += "\nWhat is the next step?"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def reflect(query: str, history: str, gathered: str, observation: str) -> list[dict[str, str]]:
    prompt = (f"QUESTION: {query}\n\nMEMORIES FOUND SO FAR:\n{gathered}\n\nSTEPS SO FAR:\n{history}\n\n"
              f"LAST OBSERVATION:\n{observation[:_OBSERVATION_CHARS]}\n\n"
              "Can the question be answered NOW with these memories? If YES, respond with ACTION: final_answer. "
              "If NO, respond with ACTION: continue, and say what is missing.")
    return [{"role": "user", "content": prompt}]


def conclude(query: str, history: str, gathered: str) -> list[dict[str, str]]:
    prompt = (f"QUESTION: {query}\n\nMEMORIES FOUND:\n{gathered}\n\nSTEPS TAKEN:\n{history}\n\n"
              "Choose the memories that best answer the question. Respond with:\n"
              "THOUGHT: <why>\nACTION: final_answer\nARGUMENTS: {\"memory_ids\": [...], \"reason\": \"...\"}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
