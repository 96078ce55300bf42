"""The cache is never wrong about a Nous server's memories for longer than
the stated bound: writes through Ferret change the next answer at once,
writes made to the server directly within ``cache.remote_staleness_seconds``."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ferret import keys
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.backends.writers import writer_for
from ferret.worker.fakes.nous_server import nous_env

BOUND = 1  # seconds: cache.remote_staleness_seconds in these tests
QUESTION = "volcano ferries timetable"


@pytest.fixture
def nous_service(sample_nous, env, redis_client, start_workers):
    settings_env = {**env, **nous_env(sample_nous), "FERRET_CACHE__REMOTE_STALENESS_SECONDS": str(BOUND)}
    start_workers(1, "--worker-class", "simple", extra_env=settings_env)
    start_workers(1, "--worker-class", "fork", extra_env=settings_env)
    settings = load_settings(environ=settings_env)
    return Producer(redis_client, settings), settings, settings_env


def _node_id(redis_client, memory_id: str) -> str:
    node = redis_client.hget(keys.nous_node_ids("default"), memory_id)
    assert node, f"no node recorded for {memory_id}"
    return node.decode()


def _ask(producer: Producer):
    result = producer.wait(producer.enqueue({"query": QUESTION}), 20)
    assert result.status == "ok"
    return result


def test_writes_and_deletes_through_ferret_change_the_next_answer_at_once(nous_service, redis_client, sample_nous):
    producer, settings, _ = nous_service
    assert all(r.id != "v1" for r in _ask(producer).results)
    assert _ask(producer).stats.cache_hit  # the answer is cached ...
    writer = writer_for(settings, redis_client, "default")
    writer.upsert([Memory(id="v1", content_title="Volcano ferries timetable", content_body="ferries leave at nine")])
    written = _ask(producer)  # ... and the write through Ferret is seen at once
    node = _node_id(redis_client, "v1")  # the server named the node itself
    assert written.results[0].id == node and not written.stats.cache_hit
    assert writer.delete(["v1"]) == 1
    deleted = _ask(producer)
    assert all(r.id != node for r in deleted.results) and not deleted.stats.cache_hit
    assert node not in {m.id for m in sample_nous.memories}


def test_a_write_made_on_the_server_directly_is_seen_within_the_bound(nous_service, redis_client, sample_nous):
    producer, _, _ = nous_service
    _ask(producer)
    cached = [key for key in redis_client.scan_iter("ferret:ns:default:cache:*")]
    assert cached and all(0 < redis_client.ttl(key) <= BOUND for key in cached)
    sample_nous.put(Memory(id="v2", content_title="Volcano ferries timetable", content_body="direct write"))
    written_at = time.monotonic()
    time.sleep(BOUND + 0.05)
    seen = _ask(producer)
    assert seen.results[0].id == "v2" and time.monotonic() - written_at < BOUND + 5
    sample_nous.remove("v2")
    time.sleep(BOUND + 0.05)
    assert all(r.id != "v2" for r in _ask(producer).results)


def test_ferret_ingest_and_forget_go_to_the_nous_server(nous_service, sample_nous, redis_client, tmp_path):
    producer, _, settings_env = nous_service
    lines = tmp_path / "new.jsonl"
    lines.write_text('{"id": "v3", "content_title": "Volcano ferries timetable"}\n')
    cli = [sys.executable, "-m", "ferret.cli.main"]
    ingest = subprocess.run([*cli, "ingest", str(lines)], env=settings_env, capture_output=True, text=True)
    assert ingest.returncode == 0, ingest.stderr
    node = _node_id(redis_client, "v3")
    assert node in {m.id for m in sample_nous.memories} and _ask(producer).results[0].id == node
    forget = subprocess.run([*cli, "forget", "v3"], env=settings_env, capture_output=True, text=True)
    assert forget.returncode == 0 and "deleted 1 of 1" in forget.stdout
    assert all(r.id != node for r in _ask(producer).results)
