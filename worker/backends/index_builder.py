"""Build a namespace's index snapshot, in a process of its own.

``python -m ferret.worker.backends.index_builder --namespace NS --lock-token T``:
started by a worker (``IndexRegistry.start_builder``) in its own session,
so it outlives the job that needed it, the job's hard timeout and the
worker itself. It loads the current snapshot and applies the change log
after it, or, when there is none (or the log no longer reaches back to it),
builds from the memories in batches; then stores the result as the new
snapshot. The build lock (``SET NX`` with a TTL) keeps one builder per
namespace; the builder renews it while it works, and a builder that dies
lets it expire, so the next worker that needs the index starts another.
``ferret ingest`` runs the same build in-process after a large load.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import threading
from pathlib import Path

import redis

from ferret import keys
from ferret.redis_plumbing.redis_conn import client_for
from ferret.redis_plumbing.scripts import registered
from ferret.settings import LocalSettings, load_settings
from ferret.worker.backends import snapshots
from ferret.worker.backends.index_registry import BUILD_LOCK_SECONDS, IndexRegistry
from ferret.worker.backends.tantivy_index import limit_malloc_arenas

logger = logging.getLogger(__name__)

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def build_snapshot(client: redis.Redis, namespace: str, settings: LocalSettings) -> snapshots.Manifest:
    """Make the namespace's index as it stands now (snapshot plus changes, or from
    the memories) in a scratch directory, and store it as the new snapshot."""
    scratch = Path(tempfile.mkdtemp(prefix="ferret-build-"))
    try:
        registry = IndexRegistry(client, settings.model_copy(update={"inline_build_max": 10**12,
                                                                     "index_memory_mb": 10**9}), scratch)
        position, index, readiness = registry.index_for(namespace)
        logger.info("namespace=%s index ready (%s, %d memories); storing the snapshot",
                    namespace, readiness.how, len(index))
        index.fold()  # the staged changes caught up after the snapshot, committed before it is stored
        index.release_writer()
        entry_dir = next(p for p in scratch.iterdir() if p.is_dir())
        manifest = snapshots.save(client, namespace, entry_dir, position, len(index))
        registry.close()
        return manifest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _renew_until(client: redis.Redis, lock: str, token: str, done: threading.Event) -> None:
    renew = registered(client, _RENEW)
    while not done.wait(BUILD_LOCK_SECONDS / 3):
        if not renew(keys=[lock], args=[token, BUILD_LOCK_SECONDS]):
            logger.warning("build lock %s lost", lock)
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lock-token", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s index-builder %(message)s")
    limit_malloc_arenas()
    settings = load_settings()
    url = settings.backend.local.store_url or settings.redis.url
    if not url:
        logger.error("the builder needs FERRET_BACKEND__LOCAL__STORE_URL (its worker passes it)")
        return 2
    client = client_for(url)
    lock = keys.index_build_lock(args.namespace)
    done = threading.Event()
    renewer = threading.Thread(target=_renew_until, args=(client, lock, args.lock_token, done), daemon=True)
    renewer.start()
    try:
        manifest = build_snapshot(client, args.namespace, settings.backend.local)
        logger.info("namespace=%s snapshot %s stored (%d memories, %d bytes)", args.namespace,
                    manifest.generation, manifest.memories, manifest.size)
        return 0
    except Exception:
        logger.exception("namespace=%s index build failed", args.namespace)
        return 1
    finally:
        done.set()
        registered(client, _RELEASE)(keys=[lock], args=[args.lock_token])


if __name__ == "__main__":
    raise SystemExit(main())
