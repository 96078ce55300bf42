"""Plain RQ, for the benchmarks to compare Ferret against, served by RQ's stock ``SimpleWorker``: a no-op job
on a queue of its own (``ferret bench service``), and Ferret's retrieval as a plain task on another
(``ferret bench queue-peers``)."""

from __future__ import annotations

import sys
from datetime import datetime

import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

NOOP = "ferret.bench.noop.noop"
QUEUE = "raw"
WORK_QUEUE = "raw-work"
WORK_FUNCTION = "ferret.bench.peer_work.retrieve"
_WORKER = ("import sys, redis; from rq import SimpleWorker, Queue; from rq.serializers import JSONSerializer;"
           "c = redis.Redis.from_url(sys.argv[1]); SimpleWorker([Queue(sys.argv[3], connection=c, "
           "serializer=JSONSerializer)], connection=c, serializer=JSONSerializer)"
           ".work(burst=sys.argv[2] == '1', logging_level='WARNING')")


def worker_command(url: str, burst: bool, queue: str = QUEUE) -> list[str]:
    """The command line of a stock RQ worker serving ``queue`` (the raw queue)."""
    return [sys.executable, "-c", _WORKER, url, "1" if burst else "0", queue]


class RawWork:
    """Ferret's retrieval as a plain RQ task (``WORK_FUNCTION``), on a queue of its own."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.queue = Queue(WORK_QUEUE, connection=client, serializer=JSONSerializer)

    def enqueue(self, queries: list[str]) -> list[str]:
        jobs = self.queue.enqueue_many([Queue.prepare_data(WORK_FUNCTION, args=(query,), result_ttl=600)
                                        for query in queries])
        return [job.id for job in jobs]

    def finished(self, job_ids: list[str]) -> bool:
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hget(Job.key_for(job_id), "status")
            return all(status == b"finished" for status in pipe.execute())


class RawQueue:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.queue = Queue(QUEUE, connection=client, serializer=JSONSerializer)

    def enqueue_noop(self, number: int) -> str:
        return self.queue.enqueue_call(NOOP, args=({"i": number},), result_ttl=600).id

    def spans(self, job_ids: list[str]) -> tuple[list[datetime], list[datetime]]:
        """When each finished job started and ended."""
        jobs = [j for j in Job.fetch_many(job_ids, connection=self.client, serializer=JSONSerializer) if j]
        return [j.started_at for j in jobs if j.started_at], [j.ended_at for j in jobs if j.ended_at]

    def wait(self, job_id: str, timeout: float) -> bool:
        """Whether the job has a result within ``timeout`` seconds."""
        job = Job.fetch(job_id, connection=self.client, serializer=JSONSerializer)
        return job.latest_result(timeout=int(timeout)) is not None


def taken_off_queue(client: redis.Redis, job_ids: list[str]) -> list[tuple[str, str, object]]:
    """Ferret jobs queued and not run yet, taken off their queues with no worker's bookkeeping (``ferret bench
    drain``'s job-core row runs them through the job core alone): each one's id, queue and payload, in order."""
    jobs = [job for job in Job.fetch_many(job_ids, connection=client, serializer=JSONSerializer) if job is not None]
    for queue in {job.origin for job in jobs}:
        client.delete(Queue(queue, connection=client).key)
    return [(job.id, job.origin, job.args[0]) for job in jobs]
