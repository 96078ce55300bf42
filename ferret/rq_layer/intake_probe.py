"""Take one queue entry as a worker's dequeue does, and say what it cost
(``ferret bench bomb`` runs this in a fresh process: its peak RSS is the
intake's). ``python -m ferret.rq_layer.intake_probe URL bounded|rq CAP JOB_ID``
prints one JSON line: the verdict, the time and the peak RSS growth."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import redis
from rq.job import Job
from rq.queue import Queue
from rq.serializers import JSONSerializer

from ferret.rq_layer.bounded_job import bounded_job_class
from ferret.rq_layer.intake import take_entry


def _peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main(argv: list[str]) -> int:
    url, kind, cap, job_id = argv
    client = redis.Redis.from_url(url)
    job_class = bounded_job_class(int(cap)) if kind == "bounded" else Job
    queue = Queue("prefetch", connection=client, serializer=JSONSerializer, job_class=job_class)
    before = _peak_kb()
    started = time.perf_counter()
    _, refusal = take_entry(job_class, job_id.encode(), queue, client, JSONSerializer)
    took = time.perf_counter() - started
    print(json.dumps({"ms": round(took * 1000, 1), "peak_growth_mb": round((_peak_kb() - before) / 1024, 1),
                      "verdict": refusal.reason if refusal else "taken",
                      "message": refusal.message if refusal else ""}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
