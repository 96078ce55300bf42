"""``ferret bench http``: what the HTTP API costs over the Python client, and how one server process holds a
thousand waiting requests.

1. Latency: the same fast-path query (cache off, so every one runs a job) through ``Client.query`` and through
   ``POST /v1/namespaces/{ns}/query`` with a kept-alive connection, one worker, rounds alternated; p50 of each
   and their difference (the target: at most 2 ms); and the CPU a query costs the server (``/proc``'s user and
   system time over the HTTP rounds, a query at a time on a kept-alive connection) beside the worker's CPU a job.
2. Waiters: with no worker running, ``waiters`` concurrent HTTP queries are sent and held until the server's
   ``ferret_http_waits_in_flight`` says it holds them all; then a worker starts and answers them. Reported: how
   many ended ``ok``, the server's RSS while it held them and its peak, and its event loop's longest stall
   (``ferret.bench.http_server_probe``)."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ferret.bench.common import private_redis, sample_memories, start_workers, stop_processes, summary_ms
from ferret.producer.api import Client
from ferret.redis_plumbing.redis_conn import client_for
from ferret.redis_plumbing.server_process import loopback_port
from ferret.serve.api_keys import KeyStore
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

NAMESPACE = "bench"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _waiting(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("ferret_http_waits_in_flight "):
            return float(line.split()[1])
    return 0.0


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _latency(py: Client, http: httpx.Client, queries: list[str], rounds: int,
             server_pid: int, worker_pid: int) -> dict[str, Any]:
    seen: dict[str, list[float]] = {"python": [], "http": []}
    cpu = {"server": 0.0, "worker": 0.0}
    body_options = {"cache": False}
    for number in range(rounds):
        order = ("python", "http") if number % 2 == 0 else ("http", "python")
        for name in order:
            if name == "http":
                server_before, worker_before = _cpu_seconds(server_pid), _cpu_seconds(worker_pid)
            for query in queries:
                started = time.perf_counter()
                if name == "python":
                    result = py.query(query, NAMESPACE, options=body_options)
                    status = result.status
                else:
                    answered = http.post(f"/v1/namespaces/{NAMESPACE}/query",
                                         json={"query": query, "options": body_options})
                    status = answered.json()["status"]
                seen[name].append(time.perf_counter() - started)
                if status != "ok":
                    raise RuntimeError(f"{name}: a query ended {status}")
            if name == "http":
                cpu["server"] += _cpu_seconds(server_pid) - server_before
                cpu["worker"] += _cpu_seconds(worker_pid) - worker_before
    python, over_http = summary_ms(seen["python"]), summary_ms(seen["http"])
    queries_over_http = len(seen["http"])
    return {"python": python, "http": over_http, "p50_difference_ms": round(over_http["p50_ms"] - python["p50_ms"], 3),
            # CPU a query over HTTP (kept-alive connection), the server's and the worker's that ran the job
            "server_cpu_ms_per_query": round(cpu["server"] / queries_over_http * 1000, 3),
            "worker_cpu_ms_per_job": round(cpu["worker"] / queries_over_http * 1000, 3),
            "round_p50_differences_ms": [
                round((statistics.median(seen["http"][r * len(queries):(r + 1) * len(queries)])
                       - statistics.median(seen["python"][r * len(queries):(r + 1) * len(queries)])) * 1000, 3)
                for r in range(rounds)]}


def _send_waiters(url: str, key: str, waiters: int, queries: list[str]) -> asyncio.Task[list[str]]:
    """``waiters`` queries sent at once on the running loop, each on its own connection: their statuses."""
    limits = httpx.Limits(max_connections=waiters + 10, max_keepalive_connections=waiters + 10)
    http = httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=600, limits=limits)

    async def one(number: int) -> str:
        answered = await http.post(f"/v1/namespaces/{NAMESPACE}/query", json={
            "query": queries[number % len(queries)], "deadline_seconds": 300, "wait_seconds": 300,
            "options": {"cache": False}, "request_id": f"waiter-{number}"})
        return str(answered.json().get("status", answered.status_code))

    async def all_of_them() -> list[str]:
        try:
            return await asyncio.gather(*(one(n) for n in range(waiters)))
        finally:
            await http.aclose()
    return asyncio.ensure_future(all_of_them())


def run(queries_per_round: int = 50, rounds: int = 6, waiters: int = 1000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ferret-bench-http-") as home:
        server = private_redis(Path(home))
        client = client_for(server.url)
        memories = sample_memories()
        MemoryStore(client, NAMESPACE).upsert(memories)
        queries = [m.content_title or m.id for m in memories][:queries_per_round]
        queries = (queries * (queries_per_round // len(queries) + 1))[:queries_per_round]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("FERRET_", "RQ_"))},
               "FERRET_REDIS__URL": server.url, "FERRET_HTTP__RATE_LIMIT": "1000000/second"}
        key, _ = KeyStore(client).create([NAMESPACE], label="bench")
        processes: list[subprocess.Popen[bytes]] = []
        port, probe_out = loopback_port(), Path(home) / "probe.json"
        url = f"http://127.0.0.1:{port}"
        try:
            processes += start_workers(env, 1, "simple", client)
            probe = subprocess.Popen([sys.executable, "-m", "ferret.bench.http_server_probe", str(port),
                                      str(probe_out)], env=env)
            processes.append(probe)
            while True:
                try:
                    httpx.get(f"{url}/healthz", timeout=1)
                    break
                except httpx.TransportError:
                    if probe.poll() is not None:
                        raise RuntimeError("the server exited at start") from None
                    time.sleep(0.1)
            settings = load_settings(environ=env)
            with Client(settings, client_for(server.url)) as py, \
                    httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=60) as http:
                latency = _latency(py, http, queries, rounds, probe.pid, processes[0].pid)
            stop_processes(processes[:1], 30)  # no worker: the waits pile up

            probe.send_signal(signal.SIGUSR1)  # the server's stall meter starts (not during the latencies)
            time.sleep(0.2)

            async def hold() -> dict[str, Any]:
                task = _send_waiters(url, key, waiters, queries)
                started = time.monotonic()
                while await asyncio.to_thread(_waiting, url) < waiters:
                    if task.done() or time.monotonic() - started > 300:
                        raise RuntimeError(f"the server held {await asyncio.to_thread(_waiting, url):g} waits of "
                                           f"{waiters}")
                    await asyncio.sleep(0.2)
                held_rss = _rss_mib(probe.pid)
                drain_started = time.monotonic()
                processes.extend(await asyncio.to_thread(start_workers, env, 1, "simple", client))
                statuses = await task
                return {"waiters": waiters, "held_all_after_s": round(drain_started - started, 2),
                        "rss_while_holding_mib": held_rss, "answered_in_s": round(time.monotonic() - drain_started, 2),
                        "ok": statuses.count("ok"), "other": sorted(set(statuses) - {"ok"})}
            held = asyncio.run(hold())
        finally:
            stop_processes(processes, 30)
            server.stop()
        return {"latency": latency, "waits": {**held, "server": _probe(probe_out)}}


def _probe(out: Path) -> dict[str, Any]:
    import json

    return json.loads(out.read_text()) if out.exists() else {"error": "the server wrote no measurements"}
