"""Helpers shared by the benchmark scripts: a private redis-server, stats."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ferret.redis_conn import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(percentile(ms, 95), 3),
            "p99_ms": round(percentile(ms, 99), 3), "n": len(ms)}


def private_redis(directory: Path) -> EmbeddedRedis:
    """A throwaway redis-server on a unix socket in ``directory``."""
    return EmbeddedRedis(directory).start()


def write_json(path: Path | None, data: object) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
