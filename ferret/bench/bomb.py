"""``ferret bench bomb``: what a zlib bomb in a job hash costs a worker's intake.

A 512 MiB run of spaces, zlib-compressed (about half a megabyte), is put in
a job hash on a private redis-server and its id on a queue; a fresh Python
process then takes the entry as a worker's dequeue does (``ferret.rq_layer.intake_probe``),
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

from ferret.bench.common import private_redis

BOMB_BYTES = 512 * 1024 * 1024
JOB_ID = "fr-0123456789abcdef0123456789abcdef"



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
                probe = [sys.executable, "-m", "ferret.rq_layer.intake_probe", server.url, kind, str(cap), JOB_ID]
                taken = subprocess.run(probe, capture_output=True, text=True, check=True, timeout=600)
                report[kind] = json.loads(taken.stdout.strip().splitlines()[-1])
            return report
        finally:
            server.stop()
