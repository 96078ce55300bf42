"""The semantic retriever's vectors of a namespace: loaded from its embeddings hash (untrusted bytes) the
first time a semantic search asks, then kept with the index as the change log moves."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np
import numpy.typing as npt
import redis

from ferret import keys
from ferret.worker.backends.change_log import as_text
from ferret.worker.backends.index_entry import SCAN_BATCH
from ferret.worker.semantic.vectors import VectorIndex

logger = logging.getLogger(__name__)


def load_vectors(client: redis.Redis, namespace: str) -> VectorIndex:
    """The namespace's stored embeddings; the size most of them have is the index's (one written
    with another size by someone else cannot set it)."""
    ids: list[str] = []
    raw: list[Any] = []
    cursor = 0
    while True:
        cursor, page = client.hscan(keys.embeddings(namespace), cursor, count=SCAN_BATCH)
        assert isinstance(page, dict)
        ids += [as_text(k) for k in page]
        raw += list(page.values())
        if cursor == 0:
            break
    sizes = Counter(len(v) for v in raw if isinstance(v, bytes) and v and len(v) % 4 == 0)
    vectors = VectorIndex(sizes.most_common(1)[0][0] // 4 if sizes else None)
    for start in range(0, len(ids), SCAN_BATCH):
        upsert_vectors(vectors, namespace, ids[start:start + SCAN_BATCH], raw[start:start + SCAN_BATCH])
    return vectors


def upsert_vectors(vectors: VectorIndex, namespace: str, ids: list[str], raw: list[Any]) -> None:
    """Stored embeddings (untrusted bytes) into ``vectors``; an id with none, or one of the
    wrong size, is taken out."""
    keep_ids: list[str] = []
    rows: list[npt.NDArray[np.float32]] = []
    gone: list[str] = []
    for memory_id, value in zip(ids, raw, strict=True):
        size = len(value) if isinstance(value, bytes) else 0
        if size == 0 or size % 4 or (vectors.dimensions and size != vectors.dimensions * 4) or \
                (rows and size != rows[0].size * 4):
            if value is not None:
                logger.warning("namespace=%s embedding of %r unreadable; left out", namespace, memory_id[:80])
            gone.append(memory_id)
            continue
        keep_ids.append(memory_id)
        rows.append(np.frombuffer(value, dtype="<f4"))
    if keep_ids:
        vectors.upsert(keep_ids, np.stack(rows))
    vectors.delete(gone)
