"""Memories a worker already holds, so a search's hits need no read from Redis.

Every search of the local backend returned ids, and each search read their
memories with its own ``HMGET`` (about three round trips a job). The worker
follows every namespace's change log anyway (``index_registry``): a memory
read once stays good until a change names it, when it is dropped (or, for
a write the catch-up read, replaced). A clear drops the namespace's all.

Bounded: at most ``capacity`` memories across namespaces, the least
recently used dropped first. A forked work horse holds what its parent held
and loses what it adds when it exits (it reads them again, as before).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from ferret.records import Memory

CAPACITY = 20_000


class HeldMemories:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._held: OrderedDict[tuple[str, str], Memory] = OrderedDict()
        self.hits = 0
        self.reads = 0

    def __len__(self) -> int:
        return len(self._held)

    def get(self, namespace: str, ids: list[str],
            read: Callable[[list[str]], dict[str, Memory]]) -> dict[str, Memory]:
        """The memories of ``ids`` (those that exist): held ones at once, the rest by one ``read``."""
        found: dict[str, Memory] = {}
        missing: list[str] = []
        for memory_id in ids:
            memory = self._held.get((namespace, memory_id))
            if memory is None:
                missing.append(memory_id)
            else:
                self._held.move_to_end((namespace, memory_id))
                found[memory_id] = memory
        self.hits += len(found)
        if missing:
            self.reads += 1
            fetched = read(missing)
            self.put(namespace, fetched.values())
            found.update(fetched)
        return found

    def put(self, namespace: str, memories: Iterable[Memory]) -> None:
        for memory in memories:
            self._held[(namespace, memory.id)] = memory
            self._held.move_to_end((namespace, memory.id))
        while len(self._held) > self.capacity:
            self._held.popitem(last=False)

    def forget(self, namespace: str, ids: Iterable[str]) -> None:
        for memory_id in ids:
            self._held.pop((namespace, memory_id), None)

    def forget_namespace(self, namespace: str) -> None:
        for key in [key for key in self._held if key[0] == namespace]:
            del self._held[key]
