"""A namespace's embeddings in one matrix: exact nearest neighbours by cosine.

Exact search is a matrix-vector product: 100k memories x 384 dimensions is
~150 MB of float32 and ~4 ms a query on this machine's CPU, so no
approximate index (and no extra engine) is needed at Ferret's sizes. Rows
are unit vectors in a buffer that doubles when full, so a write of k
memories costs O(k) (append, or overwrite in place); a delete moves the
last row into the hole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class DimensionMismatch(ValueError):
    """A query vector whose length is not the index's (another embedding model)."""

    def __init__(self, query: int, index: int) -> None:
        super().__init__(f"a {query}-dimension query for an index of {index}-dimension vectors")
        self.query = query
        self.index = index


def unit_rows(vectors: npt.ArrayLike) -> Matrix:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero)."""
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


class VectorIndex:
    def __init__(self, dimensions: int | None = None) -> None:
        self.dimensions = dimensions
        self._buffer: Matrix = np.zeros((0, dimensions or 0), dtype=np.float32)
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._row_of

    @property
    def nbytes(self) -> int:
        """What the rows hold (the buffer, room to grow included)."""
        return int(self._buffer.nbytes)

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        rows = unit_rows(vectors)
        if len(ids) != len(rows):
            raise ValueError(f"{len(ids)} ids for {len(rows)} vectors")
        if not ids:
            return
        if self.dimensions is None or not self._ids:
            self.dimensions = rows.shape[1]
            self._buffer = np.zeros((0, self.dimensions), dtype=np.float32)
        if rows.shape[1] != self.dimensions:
            raise ValueError(f"vectors of {rows.shape[1]} dimensions in an index of {self.dimensions}")
        fresh: list[int] = []
        for position, memory_id in enumerate(ids):
            row = self._row_of.get(memory_id)
            if row is None:
                fresh.append(position)
            else:
                self._buffer[row] = rows[position]
        if fresh:
            start = len(self._ids)
            self._reserve(start + len(fresh))
            self._buffer[start:start + len(fresh)] = rows[fresh]
            for offset, position in enumerate(fresh):
                self._ids.append(ids[position])
                self._row_of[ids[position]] = start + offset

    def delete(self, ids: Sequence[str]) -> None:
        for memory_id in ids:
            row = self._row_of.pop(memory_id, None)
            if row is None:
                continue
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._buffer[row] = self._buffer[last]
                self._ids[row] = moved
                self._row_of[moved] = row
            self._ids.pop()

    def _reserve(self, rows: int) -> None:
        if rows > len(self._buffer):
            grown = np.zeros((max(rows, 2 * len(self._buffer), 64), self._buffer.shape[1]), dtype=np.float32)
            grown[: len(self._ids)] = self._buffer[: len(self._ids)]
            self._buffer = grown

    def nearest(self, query: npt.ArrayLike, limit: int,
                keep: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The ``limit`` nearest ids with their cosine similarity clipped to [0, 1], best first;
        ``keep`` filters candidates (more are looked at so that filtering leaves ``limit``)."""
        if not self._ids or limit <= 0:
            return []
        vector = unit_rows(query)[0]
        if vector.shape[0] != self._buffer.shape[1]:
            raise DimensionMismatch(vector.shape[0], self._buffer.shape[1])
        scores = self._buffer[: len(self._ids)] @ vector
        wanted = min(len(scores), limit * 4 if keep else limit)
        while True:
            top = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < len(scores) else np.arange(len(scores))
            ranked = sorted(top.tolist(), key=lambda r: (-float(scores[r]), self._ids[r]))
            found = [(self._ids[r], min(1.0, max(0.0, float(scores[r])))) for r in ranked
                     if keep is None or keep(self._ids[r])]
            if len(found) >= limit or wanted >= len(scores):
                return found[:limit]
            wanted = min(len(scores), wanted * 4)
