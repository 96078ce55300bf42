"""Which memories were retrieved together: one group per sub-query.

A compound question's halves are about different things; linking a memory
from one half to a memory from the other would be noise. So only results of
the same sub-query form a group, and only its ``max_size`` best count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Protocol


class Grouped(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def sub_query(self) -> int: ...


def groups_of(results: Sequence[Grouped], max_size: int) -> list[list[str]]:
    """Ids by sub-query, best first, ``max_size`` at most; groups of one are left out."""
    by_group: dict[int, list[str]] = {}
    for item in results:
        members = by_group.setdefault(item.sub_query, [])
        if item.id not in members and len(members) < max_size:
            members.append(item.id)
    return [members for _, members in sorted(by_group.items()) if len(members) > 1]


def pairs(groups: Iterable[Sequence[str]]) -> set[tuple[str, str]]:
    """Every unordered pair within a group, as (smaller, larger) ids."""
    found: set[tuple[str, str]] = set()
    for group in groups:
        for a, b in combinations(sorted(set(group)), 2):
            found.add((a, b))
    return found
