"""``ferret bench bomb``: what a zlib bomb in a job hash costs a worker's intake.

A 512 MiB run of spaces, zlib-compressed (about half a megabyte), is put in
a job hash on a private redis-server and its id on a queue; a fresh Python
process then takes the entry as a worker's dequeue does (``take_entry``),
with Ferret's bounded job class and, for comparison, RQ's own ``Job``. Each
reports the time to its verdict and its peak RSS growth (``VmHWM``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import redis

from benchmarks.common import private_redis

BOMB_BYTES = 512 * 1024 * 1024
JOB_ID = "fr-0123456789abcdef0123456789abcdef"

_TAKE = """
import json, sys, time
from pathlib import Path
import redis
from rq.job import Job
from rq.queue import Queue
from rq.serializers import JSONSerializer
from rq_wing.bounded_job import bounded_job_class
from rq_wing.intake import take_entry

def peak_kb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

client = redis.Redis.from_url(sys.argv[1])
job_class = bounded_job_class(int(sys.argv[3])) if sys.argv[2] == "bounded" else Job
queue = Queue("prefetch", connection=client, serializer=JSONSerializer, job_class=job_class)
before = peak_kb()
started = time.perf_counter()
job, refusal = take_entry(job_class, sys.argv[4].encode(), queue, client, JSONSerializer)
took = time.perf_counter() - started
print(json.dumps({"ms": round(took * 1000, 1), "peak_growth_mb": round((peak_kb() - before) / 1024, 1),
                  "verdict": refusal.reason if refusal else "taken", "message": refusal.message if refusal else ""}))
"""


def bomb(size: int = BOMB_BYTES) -> bytes:
    deflater = zlib.compressobj(9)
    chunk = b" " * (1024 * 1024)
    return b"".join(deflater.compress(chunk) for _ in range(size // len(chunk))) + deflater.flush()


def run(cap: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ferret-bomb-") as home:
        server = private_redis(Path(home))
        try:
            client = redis.Redis.from_url(server.url)
            data = bomb()
            client.hset(f"rq:job:{JOB_ID}", mapping={"status": "queued", "origin": "prefetch", "data": data})
            report: dict[str, Any] = {"bomb_bytes": BOMB_BYTES, "stored_bytes": len(data), "cap_bytes": cap}
            for kind in ("bounded", "rq"):
                taken = subprocess.run([sys.executable, "-c", _TAKE, server.url, kind, str(cap), JOB_ID],
                                       capture_output=True, text=True, check=True, timeout=600)
                report[kind] = json.loads(taken.stdout.strip().splitlines()[-1])
            return report
        finally:
            server.stop()
