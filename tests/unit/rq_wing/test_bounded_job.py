import json
import resource
import time
import zlib

import fakeredis
import pytest
from rq.job import Job
from rq.serializers import JSONSerializer

from ferret.rq_layer.bounded_job import JobDataTooLarge, bounded_job_class, inflate

CAP = 1024 * 1024


def _bomb(size: int) -> bytes:
    inflater = zlib.compressobj(9)
    chunk = b" " * (1024 * 1024)
    out = b"".join(inflater.compress(chunk) for _ in range(size // len(chunk)))
    return out + inflater.flush()


def test_data_within_the_cap_inflates_as_rq_would():
    data = json.dumps(["ferret.rq_layer.entry.run_retrieval", None, [{"query": "x"}], {}]).encode()
    assert inflate(zlib.compress(data), CAP) == data
    assert inflate(data, CAP) == data  # not zlib: taken as stored, as RQ does
    assert inflate(zlib.compress(data)[:-4], CAP) == zlib.compress(data)[:-4]  # a truncated stream too


def test_a_bomb_is_refused_having_cost_at_most_the_cap():
    bomb = _bomb(512 * 1024 * 1024)
    assert len(bomb) < 600_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(JobDataTooLarge, match="inflates past 1,048,576 bytes"):
        inflate(bomb, CAP)
    assert time.perf_counter() - started < 5  # generous; the benchmark: docs/evidence/performance.md
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 * 1024  # KiB: no 512 MiB buffer


def test_data_compressed_twice_is_inflated_once():
    inner = zlib.compress(b" " * (64 * 1024 * 1024))
    assert inflate(zlib.compress(inner), CAP) == inner  # the second layer stays as it is: never a bomb


def test_a_job_hash_holding_a_bomb_cannot_be_fetched():
    client = fakeredis.FakeRedis()
    job = Job.create("ferret.rq_layer.entry.run_retrieval", args=({"query": "x"},), connection=client,
                     serializer=JSONSerializer, id="ferret-abc")
    job.save()
    bounded = bounded_job_class(CAP)
    fetched = bounded.fetch("ferret-abc", connection=client, serializer=JSONSerializer)
    assert fetched.args == ({"query": "x"},) or fetched.args == [{"query": "x"}]
    client.hset("rq:job:ferret-abc", "data", _bomb(64 * 1024 * 1024))
    with pytest.raises(JobDataTooLarge):
        bounded.fetch("ferret-abc", connection=client, serializer=JSONSerializer)
    client.hset("rq:job:ferret-abc", "data", zlib.compress(zlib.compress(b"[1, 2]")))
    twice = bounded.fetch("ferret-abc", connection=client, serializer=JSONSerializer)
    assert twice.data == zlib.compress(b"[1, 2]")  # RQ's own restore would have inflated it again


def test_a_jobs_started_registry_is_rqs_own_built_once_per_queue_and_connection():
    connection = fakeredis.FakeRedis()
    job_class = bounded_job_class(CAP)
    first, second = (job_class.create(func=print, connection=connection, origin="batch", serializer=JSONSerializer)
                     for _ in range(2))
    other = job_class.create(func=print, connection=connection, origin="prefetch", serializer=JSONSerializer)
    assert first.started_job_registry is second.started_job_registry  # built once
    assert first.started_job_registry.key == Job.started_job_registry.fget(first).key == "rq:wip:batch"
    assert other.started_job_registry.key == "rq:wip:prefetch"
    assert job_class.create(func=print, connection=fakeredis.FakeRedis(), origin="batch",
                            serializer=JSONSerializer).started_job_registry is not first.started_job_registry
