"""What one job hands its observers (metrics, co-retrieval) when it ends."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ferret.contract import RetrievalRequest, RetrievalResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobReport:
    result: RetrievalResult  # as stored: the one final result of the job
    request: RetrievalRequest | None  # None when the payload carried no valid request
    trace: dict[str, Any] | None = None  # the trace as stored with the result, when the job wrote one
    dropped: bool = False  # this run's result was not kept: another run of the job had stored one first
    # The result is held for its trip's end (ferret.worker.core.held_results): the observers hear of the job
    # when it is written, from the report that write makes.
    held: bool = False
    # Staged index changes committed once the result was written (the local backend's fold_seconds), and how
    # long that took; known where the job ran in the worker's own process (a fork's work horse folds on a
    # job's path only: its staging ends with it before fold_seconds pass).
    folded_after: int = 0
    fold_after_ms: float = 0.0
    folds_taken_after: int = 0  # of those folds, the ones another worker on the host had made (shared_folds)


Observer = Callable[[JobReport], None]


def after_job(observers: Sequence[Observer], report: JobReport) -> None:
    """Tell every observer; one that fails is logged and the rest still run.
    An observer must never hurt the job: it has already ended."""
    for observer in observers:
        try:
            observer(report)
        except Exception:
            logger.exception("job=%s observer %s failed", report.result.job_id, getattr(observer, "__name__", observer))
