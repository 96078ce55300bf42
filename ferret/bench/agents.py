"""The agent's prefetch loop as a benchmark: simulated agents playing LoCoMo conversations.

Each agent owns a namespace holding the first ``--history`` turns of one
LoCoMo dev conversation (agent i plays conversation i mod 5) and then
plays the next turns, one every ``period`` seconds: it writes the turn as
a memory (``remember``), prefetches context for the next turn with the
turn's text as the query (``prefetch``), thinks ``think`` seconds, and
reads ``context_for``. All agents run on one event loop with one
``AsyncClient``, against two real ``ferret worker`` processes and a
private redis-server.

Figures per row (an arrival pattern and a period):

- ready: the context read after thinking is this turn's prefetch
  (finished in time; an older one or none is not ready; with a think time
  as long as the period, the next turn's prefetch is newer: not ready);
- fresh: the turn's own memory, written just before the prefetch, is among
  the prefetch's results (turns whose text has nothing to search, such as
  "Thanks!", are left out of this rate and counted);
- superseded: prefetches a newer one of the same conversation took off the
  queue;
- enqueue-to-ready p50/p99: the prefetch's finish minus its enqueue, on
  Redis's clock, for every prefetch that ran;
- round trips per turn: the agents' own (counted on the client), and every
  command Redis processed (workers included, ``INFO stats``) per turn;
- the event loop's longest stall (``ferret.bench.loop_stall``): how late a
  ticker asking to wake every millisecond woke at worst, the thread's CPU
  time in that gap, and the longest gap net of garbage-collector pauses
  (unless ``stall_meter`` is off: the ticker's own wake-ups cost the driver
  CPU, ~0.4 ms a turn at 100 turns a second);
- the CPU each turn cost the workers, Redis and the driver (this process).

Arrivals are ``spread`` (agent i starts at i/N of the period) or
``lockstep`` (all agents at once, every period: a batch re-ingest).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.asyncio.connection import AbstractConnection as AsyncConnection
from redis.connection import AbstractConnection as SyncConnection

from ferret.bench.common import (
    commands_processed,
    cpu_seconds,
    outside_env,
    percentile,
    private_redis,
    stop_processes,
    wait_for_workers,
)
from ferret.bench.locomo import load
from ferret.bench.loop_stall import StallMeter
from ferret.producer.api import AsyncClient
from ferret.producer.rules import JobHandle
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

CONVERSATIONS = 5


@dataclass
class Row:
    arrival: str
    period: float
    agents: int
    turns: int
    asked: int = 0
    ready: int = 0
    checkable: int = 0
    fresh: int = 0
    enqueue_to_ready: list[float] = field(default_factory=list)
    superseded: int = 0
    client_round_trips: int = 0
    redis_commands: int = 0
    stall: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # workers, redis, driver (this process)

    def report(self) -> dict[str, Any]:
        turns = max(1, self.asked)
        ms = [seconds * 1000 for seconds in self.enqueue_to_ready]
        return {
            "arrival": self.arrival, "period_s": self.period, "agents": self.agents, "turns_per_agent": self.turns,
            "turns_per_s": round(self.agents / self.period, 1),
            "ready_rate": round(self.ready / turns, 4),
            "fresh_rate": round(self.fresh / self.checkable, 4) if self.checkable else None,
            "fresh_checked": self.checkable, "superseded": self.superseded,
            "enqueue_to_ready_p50_ms": round(statistics.median(ms), 1) if ms else None,
            "enqueue_to_ready_p99_ms": round(percentile(ms, 99), 1) if ms else None,
            "client_round_trips_per_turn": round(self.client_round_trips / turns, 2),
            "redis_commands_per_turn": round(self.redis_commands / turns, 2),
            **{f"loop_{name}": value for name, value in self.stall.items()},
            "wall_s": round(self.wall_seconds, 1),
            **{f"cpu_ms_per_turn_{name}": round(seconds * 1000 / turns, 2)
               for name, seconds in self.cpu_seconds.items()},
        }


class _RoundTrips:
    """Round trips of this process's clients (sends, each a command or a whole pipeline): the
    asyncio client's, and the blocking one that ``remember`` runs in a thread."""

    def __init__(self) -> None:
        self.count = 0
        self._async = AsyncConnection.send_packed_command
        self._sync = SyncConnection.send_packed_command

    def __enter__(self) -> _RoundTrips:
        async_send, sync_send, counter = self._async, self._sync, self

        async def send(connection: AsyncConnection, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            await async_send(connection, command, check_health)

        def send_blocking(connection: SyncConnection, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            sync_send(connection, command, check_health)

        AsyncConnection.send_packed_command = send  # type: ignore[assignment,method-assign]
        SyncConnection.send_packed_command = send_blocking  # type: ignore[assignment,method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        AsyncConnection.send_packed_command = self._async  # type: ignore[method-assign]
        SyncConnection.send_packed_command = self._sync  # type: ignore[method-assign]


async def _agent(client: AsyncClient, row: Row, number: int, turns: list[Memory], start: float,
                 think: float, pending: list[str]) -> None:
    """One agent: a turn every ``row.period`` seconds, whatever the reads of earlier turns do."""
    namespace, conversation = f"agent-{number}", f"chat-{number}"
    loop = asyncio.get_running_loop()
    offset = row.period * number / row.agents if row.arrival == "spread" else 0.0

    async def read(turn: Memory, handle: JobHandle) -> None:
        await asyncio.sleep(think)
        found = await client.context_for(namespace, conversation)
        row.asked += 1
        mine = found is not None and found.result.job_id == handle.job_id
        row.ready += mine
        result = found.result if found is not None and mine else await client.wait(handle, 30)
        if result.stats.trivial is None and result.status == "ok" and result.stats.superseded_by is None:
            row.checkable += 1
            row.fresh += turn.id in {item.id for item in result.results}

    reads = []
    for index, turn in enumerate(turns):
        await asyncio.sleep(max(0.0, start + offset + index * row.period - loop.time()))
        await client.remember(namespace, [turn])
        handle = await client.prefetch(namespace, conversation, turn.content_body)
        pending.append(handle.job_id)
        reads.append(asyncio.create_task(read(turn, handle)))
    await asyncio.gather(*reads)


async def _play(client: AsyncClient, row: Row, plays: list[list[Memory]], think: float, stall_meter: bool) -> None:
    meter = StallMeter().start() if stall_meter else None
    pending: list[str] = []
    start = asyncio.get_running_loop().time() + 0.5
    await asyncio.gather(*(_agent(client, row, number, plays[number], start, think, pending)
                           for number in range(row.agents)))
    if meter is not None:
        row.stall = await meter.stop()
    for job_id in pending:
        result = await client.result(job_id)
        if result is None:
            continue
        if result.stats.superseded_by is not None:
            row.superseded += 1
        elif result.timestamps.finished_at is not None:
            row.enqueue_to_ready.append(result.timestamps.finished_at - result.timestamps.enqueued_at)


def run(data: Path, agents: int = 100, turns: int = 10, periods: tuple[float, ...] = (2.0,),
        arrivals: tuple[str, ...] = ("spread", "lockstep"), think: float = 1.0, history: int = 100,
        workers: int = 2, settings_env: dict[str, str] | None = None, stall_meter: bool = True) -> list[dict[str, Any]]:
    """The rows; ``stall_meter`` off leaves out the loop's stall figures and the meter's own cost, a
    wake-up every millisecond (~44 ms of CPU a second in the driver on this project's machine)."""
    dataset = load(data)
    conversations = sorted(dataset.memories)[:CONVERSATIONS]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ferret-bench-agents-") as tmp:
        server = private_redis(Path(tmp))
        environ = {"FERRET_REDIS__URL": server.url}
        env = {**outside_env(), **environ,
               **(settings_env or {})}
        sync = redis.Redis.from_url(server.url)
        processes = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            # Every worker up (imports, settings, resources: ~1 s of CPU each) before the first row's CPU is
            # read: a start-up is no turn's (before, it landed in the first row, ~3 ms a turn at 100 turns/s).
            wait_for_workers(processes, sync)
            for period in periods:
                for arrival in arrivals:
                    sync.flushdb(asynchronous=False)
                    plays = []
                    for number in range(agents):
                        memories = dataset.memories[conversations[number % len(conversations)]]
                        MemoryStore(sync, f"agent-{number}").upsert(memories[:history])
                        plays.append(memories[history:history + turns])
                    row = Row(arrival, period, agents, turns)
                    commands_before = commands_processed(sync)
                    cpu_before = _cpu(processes, server.process)
                    began = time.perf_counter()
                    with _RoundTrips() as counted:
                        asyncio.run(_measure(environ, row, plays, think, stall_meter))
                    row.wall_seconds = time.perf_counter() - began
                    row.cpu_seconds = {name: spent - cpu_before[name]
                                       for name, spent in _cpu(processes, server.process).items()}
                    row.client_round_trips = counted.count
                    row.redis_commands = commands_processed(sync) - commands_before
                    rows.append(row.report())
        finally:
            stop_processes(processes)
            server.stop()
    return rows


def _cpu(workers: list[subprocess.Popen[bytes]], redis_server: subprocess.Popen[bytes] | None) -> dict[str, float]:
    """CPU seconds so far: the workers' (together), the redis-server's, and the driver's (this process:
    the agents' event loop, the thread that writes memories, and the warm-up's imports)."""
    own = os.times()
    return {"workers": sum(cpu_seconds(worker.pid) for worker in workers),
            "redis": cpu_seconds(redis_server.pid) if redis_server is not None else 0.0,
            "driver": own.user + own.system}


async def _measure(environ: dict[str, str], row: Row, plays: list[list[Memory]], think: float,
                   stall_meter: bool) -> None:
    settings = load_settings(environ=environ)
    client = AsyncClient(settings, settings.redis.url or "")
    try:
        await client.query("warm up", "agent-0")  # connections, imports, the workers' first job
        await _play(client, row, plays, think, stall_meter)
    finally:
        await client.close()
