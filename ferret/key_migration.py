"""Move memory-store keys written before they carried a hash tag.

Until the store could live on a Redis Cluster, a namespace's keys were
``ferret:ns:<ns>:memories`` and so on; now they are ``ferret:ns:{<ns>}:...``
(``ferret.keys``). A store that still holds keys of the old form has them
renamed once (``RENAMENX``: atomic, and a key another process moved first is
passed over); a marker key then says the pass was made, so it costs one
``GET`` afterwards. Old keys can only be on a single Redis (a cluster store
is newer than the tags), so a cluster is never scanned.
"""

from __future__ import annotations

import logging
import re

import redis

from ferret.redis_plumbing.store_conn import is_cluster

logger = logging.getLogger(__name__)

MARKER = "ferret:store-keys-tagged"
_OLD_FORM = re.compile(rb"ferret:ns:([A-Za-z0-9][A-Za-z0-9_.-]*):"
                       rb"(memories|version|nous-nodes|embeddings|changes|index:.+|affinity:[0-9a-f]{32})")


def tag_store_keys(client: redis.Redis) -> int:
    """Rename the store's old-form keys; how many were renamed."""
    if is_cluster(client) or client.get(MARKER):
        return 0
    renamed = 0
    for key in client.scan_iter(match="ferret:ns:*", count=1000):
        found = _OLD_FORM.fullmatch(key if isinstance(key, bytes) else str(key).encode())
        if found is None:
            continue
        namespace, rest = found.group(1).decode(), found.group(2).decode()
        try:
            renamed += int(client.renamenx(key, f"ferret:ns:{{{namespace}}}:{rest}"))
        except redis.ResponseError:  # gone: another process renamed it first
            continue
    client.set(MARKER, "1")
    if renamed:
        logger.warning("renamed %d memory-store keys to their hash-tagged names (ferret:ns:{<namespace>}:...)",
                       renamed)
    return renamed
