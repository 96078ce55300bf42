"""Co-retrieval strengthening on a Nous server: its own edges get stronger.

For each group, list every member's edges and strengthen each edge whose two
ends are both in the group, once. An edge to a memory outside the group (or
in another sub-query's group) is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ferret.worker.backends.nous import NousBackend


def strengthen_edges(backend: NousBackend, groups: Iterable[Sequence[str]], amount: float,
                     timeout: float) -> int:
    """Strengthen the within-group edges; the number strengthened. Raises BackendError."""
    done: set[str] = set()
    for group in groups:
        members = set(group)
        for node_id in group:
            for edge in backend.edges(node_id, timeout):
                edge_id = edge.get("id")
                if not isinstance(edge_id, str) or edge_id in done:
                    continue
                if edge.get("source_id") in members and edge.get("target_id") in members:
                    done.add(edge_id)  # before the call: a failure is not retried
                    backend.strengthen_edge(edge_id, amount, timeout)
    return len(done)
