"""Applies co-retrieval strengthening after jobs, off their critical path.

The worker's main process hands each finished result to ``submit`` (after
its result is written and its producer woken); a daemon thread applies the
strengthening. Pending work is bounded: past ``max_pending`` a job's
strengthening is dropped and counted, never waited for. A failure is logged
and counted; it never touches the job or the worker. Work still pending when
the worker stops is lost (strengthening is a hint, not data).

The caller says how much a result strengthens (``co_retrieval_amount``, from
the settings and the job's request); cache hits never strengthen again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.settings import CoRetrievalSettings
from ferret.worker.co_retrieval.groups import groups_of

logger = logging.getLogger(__name__)

Strengthen = Callable[[str, list[list[str]], float], int]
Observe = Callable[[str, int], None]  # (outcome, links strengthened)


@dataclass(frozen=True)
class Strengthening:
    namespace: str
    groups: list[list[str]]
    amount: float


class CoRetrievalApplier:
    def __init__(self, strengthen: Strengthen, max_group_size: int, max_pending: int,
                 observe: Observe | None = None) -> None:
        self._strengthen = strengthen
        self._max_group_size = max_group_size
        self._pending: queue.Queue[Strengthening | None] = queue.Queue(maxsize=max_pending)
        self._observe = observe or (lambda outcome, links: None)
        self._thread = threading.Thread(target=self._loop, name="ferret-co-retrieval", daemon=True)
        self._thread.start()

    def submit(self, result: RetrievalResult, amount: float | None) -> bool:
        """Queue the result's strengthening by ``amount``; False if dropped or nothing to do."""
        if amount is None or amount <= 0 or result.stats.cache_hit:
            return False
        groups = groups_of(result.results, self._max_group_size)
        if not groups:
            return False
        try:
            self._pending.put_nowait(Strengthening(result.namespace, groups, float(amount)))
        except queue.Full:
            logger.warning("job=%s co-retrieval strengthening dropped: %d pending", result.job_id,
                           self._pending.qsize())
            self._observe("dropped", 0)
            return False
        return True

    def drain(self, timeout: float) -> bool:
        """Wait until everything submitted so far is applied (tests, shutdown); False on timeout."""
        done = threading.Event()

        def wait_for_all() -> None:
            self._pending.join()
            done.set()

        threading.Thread(target=wait_for_all, daemon=True).start()
        return done.wait(timeout)

    def stop(self) -> None:
        self._pending.put(None)

    def _loop(self) -> None:
        while True:
            item = self._pending.get()
            try:
                if item is None:
                    return
                links = self._strengthen(item.namespace, item.groups, item.amount)
                self._observe("applied", links)
            except Exception as exc:
                logger.warning("co-retrieval strengthening failed in namespace %s: %s",
                               item.namespace if item else "?", exc)
                self._observe("failed", 0)
            finally:
                self._pending.task_done()


def co_retrieval_amount(settings: CoRetrievalSettings, request: RetrievalRequest | None) -> float | None:
    """How much a job's co-retrieved memories are strengthened (None: not at all)."""
    if request is None or not settings.enabled or (request.queue == "batch" and not settings.on_batch):
        return None
    return settings.explicit_amount if request.options.recall == "explicit" else settings.amount
