"""What the service costs beyond the retrieval it carries: CPU per job against the pipeline's own.

On a private redis-server, a namespace of ``memories`` synthetic memories
(``ferret bench scale``'s corpus) and fresh synthetic queries each round
(cache off, so every job runs the pipeline):

- **in-process**: the same pipeline and local backend run the queries in
  this process, one after another: CPU per query;
- **batch**: ``run_batch`` (what ``ferret batch`` runs) sends the queries
  through ``workers`` simple workers: CPU per job of the workers, of the
  producer (this process) and of redis-server; its lines in carriers
  (``service.batch_lines_per_job``, ``ferret.carriers``);
- **batch_one_job_a_line**: the same with one RQ job a line (the setting at
  1), alternated with the batch row (which of the two goes first);
- **fast path**: one prefetch job at a time, enqueued and waited for (an
  agent's turn without the write): the same three;
- **agent turn**: one agent's turns one after another, each as an agent's
  turn is: a memory written (``remember``), a prefetch asking about it, the
  prefetch's result waited for: the same three, per turn (the producer's
  share is the agent's client). The turns run on a redis-server and
  workers of their own (as many, the namespace loaded the same way): on the
  others, every worker and the in-process pipeline would fold the turns'
  writes into their index on a later job or query, inside the other paths'
  figures.

Rounds alternate the paths; the medians of the rounds are printed, with the
service's total over the in-process figure (issue target for the batch: at
most 2x), the Redis commands a job (those Lua scripts run included), and
every job's outcome (a turn's also whether its prefetch found
the memory written just before it).

    ferret bench overhead [--jobs 2000] [--rounds 3] [--memories 10000] [--workers 2] [--jobs-per-trip 16]
"""

from __future__ import annotations

import json
import secrets
import statistics
import tempfile
import time
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import (
    commands_processed,
    cpu_seconds,
    outside_env,
    private_redis,
    start_workers,
    stop_processes,
)
from ferret.bench.scale import Corpus
from ferret.producer.api import Client
from ferret.producer.batch import run_batch
from ferret.producer.client import Producer
from ferret.redis_plumbing.embedded_redis import EmbeddedRedis
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from ferret.worker.core.resources import build_resources
from ferret.worker.pipeline.orchestrator import run_pipeline

NAMESPACE = "overhead"
PATHS = ("batch", "batch_one_job_a_line", "fast_path", "agent_turn")
NO_CACHE = {"FERRET_CACHE__ENABLED": "false", "FERRET_CACHE__COALESCE": "false"}


def _own_cpu() -> float:
    return time.process_time()


class _Service:
    def __init__(self, url: str, server_pid: int, workers: int, jobs_per_trip: int | None = None) -> None:
        self.env = {**outside_env(), "FERRET_REDIS__URL": url, **NO_CACHE,
                    **({"FERRET_SERVICE__JOBS_PER_TRIP": str(jobs_per_trip)} if jobs_per_trip else {})}
        self.client = redis.Redis.from_url(url)
        self.server_pid = server_pid
        self.workers = start_workers(self.env, workers, "simple", self.client)
        self.producer = Producer(self.client, load_settings(environ=self.env))
        # the batch as before carriers: one RQ job a line (service.batch_lines_per_job 1)
        self.one_job_a_line = Producer(self.client, load_settings(
            environ={**self.env, "FERRET_SERVICE__BATCH_LINES_PER_JOB": "1"}))

    @cached_property
    def agent(self) -> Client:
        """The agent turns' client (``remember`` besides the producer's calls), on the same connections."""
        return Client(self.producer.settings, self.client)

    def measure(self, run: Any, jobs: int) -> tuple[dict[str, float], float]:
        """CPU per job of workers, producer and Redis while ``run`` runs, and the Redis commands a job
        (``commands_processed``, as ``ferret bench agents`` counts them; the workers' idle beats too)."""
        commands = commands_processed(self.client)
        workers = sum(cpu_seconds(w.pid) for w in self.workers)
        server, own = cpu_seconds(self.server_pid), _own_cpu()
        run()
        per_job = {"workers": sum(cpu_seconds(w.pid) for w in self.workers) - workers,
                   "producer": _own_cpu() - own, "redis": cpu_seconds(self.server_pid) - server}
        per_job = {name: value / jobs * 1000 for name, value in per_job.items()}
        per_job["total"] = sum(per_job.values())
        # the reading before counts itself once it has run: the difference holds it, not the reading after
        return per_job, (commands_processed(self.client) - commands - 1) / jobs


def agent_turns(agent: Client, turns: int, round_tag: str, outcomes: Counter[str]) -> None:
    """``turns`` of one agent, one after another (the issue's probe's turn without its thinking): a memory
    naming a fresh project written to ``NAMESPACE``, a prefetch asking about that project, its result
    waited for. Each turn's status is counted in ``outcomes``, and ``fresh`` when the memory was among the results."""
    for turn in range(turns):
        token = secrets.token_hex(5)
        memory_id = f"turn-{round_tag}-{turn}"
        memory = {"id": memory_id, "type": "episode", "content_title": f"turn {turn} note {token}",
                  "content_body": f"In turn {turn} the user mentioned project {token} and its deadline.",
                  "provenance_created_at": "2026-11-24T10:00:00Z"}
        agent.remember(NAMESPACE, [memory])
        question = f"what did I say about project {token}?"
        result = agent.wait(agent.prefetch(NAMESPACE, "bench-agent", question), 60)
        outcomes[result.status] += 1
        outcomes["fresh"] += any(item.id == memory_id for item in result.results)


def load_corpus(client: redis.Redis, corpus: Corpus, memories: int) -> redis.Redis:
    """``client``, its namespace ``NAMESPACE`` holding ``memories`` of ``corpus``."""
    MemoryStore(client, NAMESPACE).upsert(list(corpus.memories(memories)))
    return client


def corpus_server(home: Path, corpus: Corpus, memories: int) -> tuple[EmbeddedRedis, redis.Redis]:
    """A private redis-server in ``home`` whose namespace ``NAMESPACE`` holds ``memories`` of ``corpus``."""
    server = private_redis(home)
    assert server.process is not None
    return server, load_corpus(redis.Redis.from_url(server.url), corpus, memories)


def run(jobs: int, rounds: int, memories: int, workers: int, jobs_per_trip: int | None = None) -> dict[str, Any]:
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="ferret-overhead-") as home:
        (Path(home) / "paths").mkdir()
        (Path(home) / "agent").mkdir()
        server, client = corpus_server(Path(home) / "paths", corpus, memories)
        assert server.process is not None
        settings = load_settings(environ={"FERRET_REDIS__URL": server.url, **NO_CACHE})
        resources = build_resources(settings, client, Path(home) / "indexes")
        agent_server, _ = corpus_server(Path(home) / "agent", corpus, memories)  # the agent turns' (the module)
        assert agent_server.process is not None
        services: list[_Service] = []
        try:
            service = _Service(server.url, server.process.pid, workers, jobs_per_trip)
            services.append(service)
            agent = _Service(agent_server.url, agent_server.process.pid, workers, jobs_per_trip)
            services.append(agent)
            for each in services:
                for handle in [each.producer.enqueue({"query": corpus.query(), "namespace": NAMESPACE,
                                                      "deadline_seconds": 600}) for _ in range(40)]:
                    each.producer.wait(handle, 600)  # every worker's index warm
            agent_turns(agent.agent, 20, "warm", Counter())
            run_pipeline(corpus.query(), resources.backends.for_namespace(NAMESPACE), settings.pipeline)
            rows: dict[str, list[dict[str, float]]] = {"in_process": [], **{kind: [] for kind in PATHS}}
            commands: dict[str, list[float]] = {kind: [] for kind in PATHS}
            outcomes: dict[str, Counter[str]] = {kind: Counter() for kind in PATHS}
            for number in range(rounds):
                queries = [corpus.query() for _ in range(jobs)]
                own = _own_cpu()
                for query in queries:
                    backend = resources.backends.for_namespace(NAMESPACE)
                    run_pipeline(query, backend, settings.pipeline)
                rows["in_process"].append({"total": (_own_cpu() - own) / jobs * 1000})
                batches = {"batch": service.producer, "batch_one_job_a_line": service.one_job_a_line}
                for kind in sorted(batches, reverse=number % 2 == 1):  # the two alternate which goes first
                    lines = [json.dumps({"query": corpus.query(), "namespace": NAMESPACE}) for _ in range(jobs)]
                    out = Path(home) / "batch.jsonl"

                    def batch(lines: list[str] = lines, out: Path = out, kind: str = kind,
                              producer: Producer = batches[kind]) -> None:
                        summary = run_batch(producer, lines, out, wait_seconds=600)
                        outcomes[kind].update(summary.by_status)
                        outcomes[kind]["unfinished"] += summary.unfinished
                        outcomes[kind]["bad_results"] += summary.bad_results

                    _record(rows, commands, kind, service.measure(batch, jobs))
                fast = max(1, jobs // 4)

                def one_at_a_time(fast: int = fast) -> None:
                    for _ in range(fast):
                        outcomes["fast_path"][service.producer.wait(service.producer.enqueue(
                            {"query": corpus.query(), "namespace": NAMESPACE, "queue": "prefetch",
                             "deadline_seconds": 60}), 60).status] += 1

                _record(rows, commands, "fast_path", service.measure(one_at_a_time, fast))
                _record(rows, commands, "agent_turn", agent.measure(
                    lambda fast=fast, number=number: agent_turns(agent.agent, fast, str(number),
                                                                 outcomes["agent_turn"]), fast))
        finally:
            for each in services:
                stop_processes(each.workers, 30)
            server.stop()
            agent_server.stop()
    medians = {kind: {part: round(statistics.median(r[part] for r in runs), 3) for part in runs[0]}
               for kind, runs in rows.items()}
    base = medians["in_process"]["total"]
    return {"jobs": jobs, "rounds": rounds, "memories": memories, "workers": workers,
            "jobs_per_trip": jobs_per_trip or "the setting's", "cpu_ms_per_job": medians,
            "redis_commands_per_job": {kind: round(statistics.median(counts), 1) for kind, counts in commands.items()},
            **{f"{kind}_over_in_process": round(medians[kind]["total"] / base, 2) for kind in PATHS},
            "each_round_over_in_process": {kind: [round(row["total"] / own["total"], 2)
                                                  for row, own in zip(rows[kind], rows["in_process"], strict=True)]
                                           for kind in PATHS},
            "outcomes": {kind: {status: count for status, count in counts.items() if count}
                         for kind, counts in outcomes.items()}}


def _record(rows: dict[str, list[dict[str, float]]], commands: dict[str, list[float]], kind: str,
            measured: tuple[dict[str, float], float]) -> None:
    rows[kind].append(measured[0])
    commands[kind].append(measured[1])
