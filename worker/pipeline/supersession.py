"""A memory that names the memories it replaces (``Memory.supersedes``) ranks above each of them.

An agent that learnt a changed fact writes a new memory that supersedes the old one ("moved to Lisbon",
superseding "lives in Berlin"). The old memory stays, for a question about what used to be true, but it
never ranks above its successor: when both are among the results, the successor takes the old one's place
and the old one follows it, marked ``superseded_by``; when only the old one was found, its successor is put
in its place (the memory store gives it: ``successors``), with the old one right after, marked. A chain
(A replaced by B, B by C) is followed to its newest memory. Nothing else moves, and a memory that names
nothing changes nothing.

The rule is pure: ``successors_first(hits, successors)``, where ``successors`` maps the id of each
superseded memory among the hits to the memory that replaces it now (a store checks that the successor
still names it: a successor rewritten without it releases the old one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ferret.records import Hit, Memory

MAX_CHAIN = 8  # the longest chain of successors followed (a cycle of supersessions ends there)


def newest(memory_id: str, successors: Mapping[str, Memory]) -> Memory | None:
    """The newest memory in the chain that replaces ``memory_id`` (None: nothing replaces it)."""
    found: Memory | None = None
    seen = {memory_id}
    current = memory_id
    for _ in range(MAX_CHAIN):
        successor = successors.get(current)
        if successor is None or successor.id in seen:
            break
        found, current = successor, successor.id
        seen.add(current)
    return found


def successors_first(hits: Sequence[Hit], successors: Mapping[str, Memory]) -> tuple[Hit, ...]:
    """``hits`` with each superseded memory just below its newest successor (put in its place when it was
    not among them, or was below it), marked ``superseded_by``; the list is otherwise unchanged, and no
    longer than it was (a successor put in pushes the last one out)."""
    if not successors:
        return tuple(hits)
    by_id = {hit.id: hit for hit in hits}
    ordered: list[Hit] = []
    placed: set[str] = set()
    for hit in hits:
        if hit.id in placed:
            continue
        successor = newest(hit.id, successors)
        if successor is None:
            ordered.append(hit)
            placed.add(hit.id)
            continue
        if successor.id not in placed:  # the successor comes here, at the old memory's rank
            ahead = by_id.get(successor.id)
            if ahead is None:
                ahead = dataclasses.replace(Hit.of(successor, hit.score), sub_query=hit.sub_query)
            ordered.append(ahead)
            placed.add(successor.id)
        ordered.append(dataclasses.replace(hit, superseded_by=successor.id))
        placed.add(hit.id)
    return tuple(ordered[:len(hits)])


def superseded_ids(memories: Sequence[Memory]) -> dict[str, str]:
    """Each memory id that one of ``memories`` replaces -> the id of the one that replaces it (the write
    path's map)."""
    return {old: memory.id for memory in memories for old in memory.supersedes if old != memory.id}
