"""A memory that names the memory it replaces (``supersedes``) is answered first, the old one after it,
marked, through every write path: the Python client, the HTTP API and ``ferret ingest``. Real redis-server,
real workers of both classes; the old fact shares the question's words, the new one does not."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

import ferret
from tests.conftest import ROOT
from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)

OLD = {"id": "berlin", "type": "fact", "content_body": "User lives in Berlin, in a flat in Kreuzberg"}
NEW = {"id": "lisbon", "type": "fact", "content_body": "User moved to Lisbon last week and stays there now",
       "supersedes": ["berlin"]}
OTHER = {"id": "whales", "type": "event", "content_body": "User watched a documentary about whales"}
QUESTION = "where does the user live? Berlin?"


def _assert_newest_first(result) -> None:
    items = [(item["id"], item.get("superseded_by")) if isinstance(item, dict) else (item.id, item.superseded_by)
             for item in (result["results"] if isinstance(result, dict) else result.results)]
    assert items[:2] == [("lisbon", None), ("berlin", "lisbon")], items
    context = result["context"] if isinstance(result, dict) else result.context
    first, second = context.splitlines()[:2]
    assert "Lisbon" in first and "superseded" in second and "Berlin" in second, context


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_the_python_client_the_new_fact_first_the_old_below_it_marked(env, monkeypatch, start_workers,
                                                                      worker_class):
    for name, value in env.items():
        if name.startswith("FERRET_"):
            monkeypatch.setenv(name, value)
    start_workers(1, "--worker-class", worker_class)
    with ferret.connect() as client:
        client.remember("moves", [OLD, OTHER])
        before = client.query(QUESTION, "moves")
        assert before.results[0].id == "berlin" and before.results[0].superseded_by is None
        client.remember("moves", [NEW])  # the index and the cache follow at once
        _assert_newest_first(client.query(QUESTION, "moves"))
        client.remember("moves", [{**NEW, "supersedes": []}])  # rewritten without it: the old one is free
        again = client.query(QUESTION, "moves")
        assert again.results[0].id == "berlin" and again.results[0].superseded_by is None


def test_over_http_and_from_a_file(env, start_workers, serve, tmp_path):  # noqa: F811
    start_workers(1)
    served = serve()
    key = make_key(env, "-n", "moves", "-n", "filed", "--label", "tests")
    with httpx.Client(base_url=served.url, headers=bearer(key), timeout=60) as http:
        assert http.post("/v1/namespaces/moves/memories", json={"memories": [OLD, NEW, OTHER]}).json() == \
            {"written": 3}
        answered = http.post("/v1/namespaces/moves/query", json={"query": QUESTION})
        assert answered.status_code == 200, answered.text
        _assert_newest_first(answered.json())
        refused = http.post("/v1/namespaces/moves/memories",
                            json={"memories": [{**NEW, "supersedes": ["ok", "bad\u0001id"]}]})
        assert refused.status_code == 422 and "memories.0.supersedes" in refused.text, refused.text
    source = tmp_path / "moves.jsonl"
    source.write_text("".join(json.dumps(memory) + "\n" for memory in (OLD, NEW, OTHER)))
    ingest = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(source), "-n", "filed",
                             "--quiet"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 0, ingest.stderr
    asked = subprocess.run([sys.executable, "-m", "ferret.cli.main", "query", QUESTION, "-n", "filed", "--json"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0, asked.stderr
    _assert_newest_first(json.loads(asked.stdout))
