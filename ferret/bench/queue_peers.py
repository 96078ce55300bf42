"""Ferret's worker against the queue engines a user could run the same work on: arq and raw RQ.

On a private redis-server with a namespace of ``memories`` synthetic memories (``ferret bench scale``'s
corpus), one worker process per system, each warm, and the same fresh queries for every system in a round:

- **ferret**: a Ferret simple worker serving the batch queue; each query is a Ferret job (its envelope
  checked, the pipeline run, its result document and trace written: the service's whole job);
- **ferret, one job a trip**: the same with ``service.jobs_per_trip: 1`` (the hot path before several
  jobs a trip), for the A/B;
- **arq**: arq's worker (its defaults) running the same pipeline on the same backend as a task
  (``ferret.bench.peer_work``); it returns the number of hits, which arq keeps as its result;
- **raw RQ**: RQ's stock ``SimpleWorker`` running that same task.

Each round enqueues the queries into every system's queue (the queue deep, as in a batch), one system at a
time, in an order that rotates from round to round, and waits until all have their result. Printed per
system: the worker's CPU per job, Redis's CPU per job, and jobs per second (queries over the time from the
first enqueue to the last result), medians over the rounds, and each system's worker CPU over arq's.

    ferret bench queue-peers [--jobs 1000] [--rounds 3] [--memories 10000]
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import cpu_seconds, outside_env, start_workers, stop_processes
from ferret.bench.overhead import NAMESPACE, NO_CACHE, corpus_server, load_corpus
from ferret.bench.peer_work import ARQ_WORKER, NAMESPACE_VARIABLE
from ferret.bench.scale import Corpus
from ferret.contract import RetrievalResult
from ferret.producer.client import Producer
from ferret.rq_layer.raw_baseline import WORK_QUEUE, RawWork, worker_command
from ferret.settings import load_settings

POLL_SECONDS = 0.02
WAIT_SECONDS = 600


def arq_installed() -> bool:
    try:
        import arq  # noqa: F401
    except ImportError:
        return False
    return True


class _System:
    """One queue engine: its worker process, how to enqueue a round's queries, and when they are done."""

    def __init__(self, name: str, worker: subprocess.Popen[bytes], enqueue: Callable[[list[str]], Any],
                 done: Callable[[Any], bool], close: Callable[[], object] = lambda: None,
                 outcomes: Callable[[Any], Counter[str]] | None = None) -> None:
        self.name, self.worker, self.enqueue, self.done, self.close = name, worker, enqueue, done, close
        self.outcomes = outcomes  # a round's final statuses, where the system keeps them (Ferret's results)
        self.seen: Counter[str] = Counter()  # the measured rounds' statuses

    def run(self, queries: list[str], server_pid: int) -> dict[str, float]:
        cpu, server, began = cpu_seconds(self.worker.pid), cpu_seconds(server_pid), time.monotonic()
        handle = self.enqueue(queries)
        deadline = began + WAIT_SECONDS
        while not self.done(handle):
            if time.monotonic() > deadline or self.worker.poll() is not None:
                raise RuntimeError(f"{self.name}: the round did not finish")
            time.sleep(POLL_SECONDS)
        took = time.monotonic() - began
        jobs = len(queries)
        row = {"worker_cpu_ms": (cpu_seconds(self.worker.pid) - cpu) / jobs * 1000,
               "redis_cpu_ms": (cpu_seconds(server_pid) - server) / jobs * 1000, "jobs_per_s": jobs / took}
        if self.outcomes is not None:  # read after the round's CPU: reading the results is not the round's work
            self.seen.update(self.outcomes(handle))
        return row


def _ferret(name: str, env: dict[str, str], client: redis.Redis) -> _System:
    worker, = start_workers(env, 1, "simple", client)
    producer = Producer(client, load_settings(environ=env))

    def enqueue(queries: list[str]) -> list[Any]:
        return producer.enqueue_many([{"query": q, "namespace": NAMESPACE, "queue": "batch",
                                       "deadline_seconds": WAIT_SECONDS} for q in queries])

    def done(handles: list[Any]) -> bool:
        return all(result is not None for result in producer.results_of(handles))

    def outcomes(handles: list[Any]) -> Counter[str]:
        return Counter(result.status if isinstance(result, RetrievalResult) else "none" if result is None
                       else "unreadable" for result in producer.results_of(handles))

    return _System(name, worker, enqueue, done, outcomes=outcomes)


def _raw_rq(env: dict[str, str], client: redis.Redis) -> _System:
    worker = subprocess.Popen(worker_command(env["FERRET_REDIS__URL"], False, WORK_QUEUE), env=env)
    work = RawWork(client)
    return _System("raw RQ", worker, work.enqueue, work.finished)


def _arq(env: dict[str, str], client: redis.Redis) -> _System:
    from arq.connections import RedisSettings, create_pool

    worker = subprocess.Popen([sys.executable, "-c", ARQ_WORKER], env=env)
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(RedisSettings.from_dsn(env["FERRET_REDIS__URL"])))

    def enqueue(queries: list[str]) -> list[str]:
        async def all_of() -> list[str]:
            jobs = [await pool.enqueue_job("arq_retrieve", q) for q in queries]
            return [job.job_id for job in jobs if job is not None]

        return loop.run_until_complete(all_of())

    def done(job_ids: list[str]) -> bool:
        return int(client.exists(*(f"arq:result:{job_id}" for job_id in job_ids))) == len(job_ids)

    return _System("arq", worker, enqueue, done, lambda: (loop.run_until_complete(pool.aclose()), loop.close()))


def run(jobs: int, rounds: int, memories: int) -> dict[str, Any]:
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="ferret-queue-peers-") as home:
        server, client = corpus_server(Path(home), corpus, memories)
        assert server.process is not None
        env = {**outside_env(), "FERRET_REDIS__URL": server.url, NAMESPACE_VARIABLE: NAMESPACE, **NO_CACHE}
        systems: list[_System] = []
        try:
            systems.append(_ferret("ferret", env, client))
            # the A/B: one worker per system at a time holds the queue, so this one gets its own Redis database
            one_env = {**env, "FERRET_REDIS__URL": _other_database(server.url),
                       "FERRET_SERVICE__JOBS_PER_TRIP": "1"}
            one_client = load_corpus(redis.Redis.from_url(one_env["FERRET_REDIS__URL"]), Corpus(), memories)
            systems.append(_ferret("ferret, one job a trip", one_env, one_client))
            systems.append(_raw_rq(env, client))
            if arq_installed():
                systems.append(_arq(env, client))
            for system in systems:  # warm: every worker's index built and its code loaded
                system.run([corpus.query() for _ in range(40)], server.process.pid)
                system.seen.clear()
            rows: dict[str, list[dict[str, float]]] = {system.name: [] for system in systems}
            for index in range(rounds):
                queries = [corpus.query() for _ in range(jobs)]
                turn = systems[index % len(systems):] + systems[:index % len(systems)]
                for system in turn:
                    rows[system.name].append(system.run(queries, server.process.pid))
        finally:
            for system in systems:
                system.close()
            stop_processes([system.worker for system in systems], 30)
            server.stop()
    medians: dict[str, dict[str, Any]] = {
        name: {part: round(statistics.median(r[part] for r in runs), 3) for part in runs[0]}
        for name, runs in rows.items()}
    for system in systems:  # a job that failed fast would cost less than one that ran: say how they ended
        if system.outcomes is not None:
            medians[system.name]["outcomes"] = dict(system.seen)
    report: dict[str, Any] = {"jobs": jobs, "rounds": rounds, "memories": memories, "systems": medians,
                              "arq": "installed" if arq_installed() else "not installed (pip install --no-deps arq)"}
    if "arq" in medians:
        arq_cpu = medians["arq"]["worker_cpu_ms"]
        report["worker_cpu_over_arq"] = {name: round(row["worker_cpu_ms"] / arq_cpu, 2)
                                         for name, row in medians.items()}
    return report


def _other_database(url: str) -> str:
    """The same server's database 1 (the private server listens on a unix socket: ``?db=1``)."""
    return url + ("&" if "?" in url else "?") + "db=1"
