"""What Ferret relies on in RQ, read off the code: the RQ methods Ferret's worker, job and queue classes
redefine (with RQ's signature of each), RQ's private names Ferret's code touches, and the Redis key formats
Ferret spells out itself. ``test_rq_surface`` holds it equal to ``rq_surface.json``; after an RQ upgrade,
``python -m tests.unit.rq_wing.rq_surface > tests/unit/rq_wing/rq_surface.json`` writes the new one, and
the diff is what to review."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import rq
from rq import Queue, Worker
from rq.executions import Execution
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.results import Result

ROOT = Path(__file__).resolve().parents[3]
FERRET_SOURCES = ("ferret", "worker", "producer")
_PRIVATE_USE = re.compile(r"\.(_[a-z][a-z0-9_]*)\b")
_RQ_PRIVATE = re.compile(r"(?:self|cls)\.(_[a-z][a-z0-9_]*)\b|def (_[a-z][a-z0-9_]*)\(")


def _ferret_classes() -> list[type]:
    from ferret.rq_layer.intake import guarded_queue_class
    from ferret.rq_layer.runner import bounded_job_class
    from ferret.rq_layer.worker_classes import CLASSES

    return [*CLASSES.values(), bounded_job_class(1 << 20), guarded_queue_class(lambda refusal: None),
            guarded_queue_class(lambda refusal: None, lean=False)]


def _rq_owner(cls: type, name: str) -> type | None:
    """The RQ class whose definition of ``name`` Ferret's class ``cls`` redefines (None: RQ has none)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("rq.") and name in vars(klass):
            return klass
    return None


def overridden() -> dict[str, str]:
    """``rq.module.Class.method`` -> RQ's signature, for each RQ method a Ferret class redefines."""
    found: dict[str, str] = {}
    for cls in _ferret_classes():
        for klass in cls.__mro__:
            if klass.__module__.startswith("rq.") or klass is object:
                continue
            for name, value in vars(klass).items():
                if name.startswith("__") or not (callable(value) or isinstance(value, property | classmethod)):
                    continue
                owner = _rq_owner(cls, name)
                if owner is None:
                    continue
                rq_value = vars(owner)[name]
                target = rq_value.fget if isinstance(rq_value, property) else getattr(rq_value, "__func__", rq_value)
                try:
                    signature = str(inspect.signature(target))
                except (TypeError, ValueError):
                    signature = "(property)" if isinstance(rq_value, property) else "?"
                found[f"{owner.__module__}.{owner.__qualname__}.{name}"] = signature
    return dict(sorted(found.items()))


def _sources(roots: list[Path]) -> str:
    return "\n".join(path.read_text(encoding="utf-8") for root in roots for path in sorted(root.rglob("*.py")))


def private_names() -> list[str]:
    """RQ's private names (attributes it sets on itself, methods it defines) that Ferret's code uses."""
    rq_text = _sources([Path(rq.__file__).parent])
    rq_private = {a or b for a, b in _RQ_PRIVATE.findall(rq_text)}
    ferret_text = _sources([ROOT / name for name in FERRET_SOURCES])
    return sorted({name for name in _PRIVATE_USE.findall(ferret_text) if name in rq_private
                   and not name.startswith("_ferret")})


def key_formats() -> dict[str, str]:
    """The Redis keys Ferret writes or reads by name, as RQ forms them."""
    import fakeredis

    connection = fakeredis.FakeRedis()  # nothing is sent: the keys are only formed
    queue = Queue("batch", connection=connection)
    execution = Execution("EXECUTION", "JOB", connection=connection)
    return {"job": Job.redis_job_namespace_prefix, "queue": Queue.redis_queue_namespace_prefix,
            "queues": Queue.redis_queues_keys, "worker": Worker.redis_worker_namespace_prefix,
            "workers": Worker.redis_workers_keys, "started registry": StartedJobRegistry(queue=queue).key,
            "intermediate queue": queue.intermediate_queue_key, "execution": execution.key,
            "execution entry": execution.composite_key, "results": Result.get_key("JOB")}


def spelt_by_ferret() -> list[str]:
    """The RQ key prefixes Ferret's code writes out itself (``"rq:..."`` in a string)."""
    text = _sources([ROOT / name for name in FERRET_SOURCES])
    return sorted(set(re.findall(r"[\"'(^](rq:[a-z]+:?)", text)))


def surface() -> dict[str, Any]:
    return {"overridden": overridden(), "private_names": private_names(), "key_formats": key_formats()}


if __name__ == "__main__":
    print(json.dumps(surface(), indent=2, sort_keys=True))
