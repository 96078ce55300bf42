"""``ferret.connect()`` against a real redis-server and real workers: the CLI's
settings, requests, memories written and deleted as ``ferret ingest`` does,
and the shared embedded Redis when no URL is set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ferret
from ferret.errors import InvalidMemory, InvalidRequest
from ferret.records import Memory
from tests.conftest import ROOT


@pytest.fixture
def client(env, monkeypatch):
    for name, value in env.items():
        if name.startswith("FERRET_"):
            monkeypatch.setenv(name, value)
    with ferret.connect() as connected:
        yield connected


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_remember_query_forget(client, start_workers, worker_class):
    start_workers(1, "--worker-class", worker_class)
    written = client.remember("kitchen", [
        Memory(id="bread", type="procedure", content_body="Sourdough: feed the starter the night before"),
        {"id": "anna", "type": "event", "content_body": "Dinner party for Anna on Friday"},
        '{"id": "rome", "type": "plan", "content_body": "Flight to Rome on 3 May, economy class"}',
    ])
    assert written == 3
    result = client.query("when is the dinner party for Anna", "kitchen")
    assert result.status == "ok" and result.results[0].id == "anna"
    handle = client.enqueue(query="sourdough starter", namespace="kitchen", request_id="turn-1")
    assert client.wait(handle, 20).results[0].id == "bread"
    assert client.status(handle).status == "ok" and client.trace(handle)["spans"]
    assert client.result(handle.job_id).results[0].id == "bread"
    assert client.forget("kitchen", ["anna", "nope"]) == 1
    again = client.query("when is the dinner party for Anna", "kitchen", options={"cache": False})
    assert "anna" not in [item.id for item in again.results]


def test_bad_memories_and_namespaces_name_the_position_and_field(client):
    with pytest.raises(InvalidMemory, match=r"memories\[1\]\.content_body"):
        client.remember("kitchen", [{"id": "a", "content_body": "fine"}, {"id": "b", "content_body": 5}])
    with pytest.raises(InvalidMemory, match=r"memories\[0\]"):
        client.remember("kitchen", [{"id": "c", "content_body": "ring the \x07 bell"}])
    with pytest.raises(InvalidMemory, match=r"memories\[0\]: is a int"):
        client.remember("kitchen", [5])
    with pytest.raises(InvalidRequest, match="namespace"):
        client.remember("../other", [{"id": "a", "content_body": "x"}])
    with pytest.raises(InvalidRequest, match="query"):
        client.enqueue(namespace="kitchen")


def test_with_no_url_it_uses_the_shared_embedded_redis(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_") and k != "RQ_REDIS_URL"}
    env |= {"FERRET_REDIS__EMBEDDED_DIR": str(tmp_path / "redis"), "PYTHONPATH": str(ROOT)}
    script = ("import ferret\n"
              "with ferret.connect() as c:\n"
              "    print(c.remember('n', [{'id': 'a', 'content_body': 'hello'}]), c.redis.ping())\n")
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and first.stdout.split() == ["1", "True"], first.stderr
    cli = subprocess.run([sys.executable, "-m", "ferret.cli.main", "redis", "url"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert cli.returncode == 0 and str(tmp_path / "redis") in cli.stdout  # the CLI's server, the same one
    subprocess.run([sys.executable, "-m", "ferret.cli.main", "redis", "stop"], env=env, capture_output=True,
                   timeout=60)
