"""A newcomer's first hour with memories that are not about trading: the 30 cooking and travel notes
that ship with Ferret walked through ingest, a worker, query, result, trace, batch and redis stop,
every step a subprocess on the embedded Redis, as a user with nothing configured meets them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from importlib import resources

from ferret.cli import exit_codes
from tests.conftest import ROOT, wait_until

NAMESPACE = "home"


def _ferret(env, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _section(table: str, title: str) -> str:
    """The section column of the result table's row for ``title``."""
    [row] = [line for line in table.splitlines() if line.rstrip().endswith(title)]
    return next(word for word in row.split() if word.isupper() and word.isalpha())


def test_a_non_trading_corpus_from_ingest_to_redis_stop(embedded_env, tmp_path):
    env = embedded_env
    corpus = resources.files("ferret.data").joinpath("everyday_memories.jsonl")
    ingest = _ferret(env, "ingest", "-n", NAMESPACE, str(corpus))
    assert ingest.returncode == 0, ingest.stderr
    assert f"stored 30 memories in namespace '{NAMESPACE}'" in ingest.stdout
    assert "started the embedded Redis" in ingest.stderr

    worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # A compound question whose first part shares no word with any memory ("fly" / "flights").
        asked = _ferret(env, "query", "-n", NAMESPACE, "When do I fly and what class did I book?")
        assert asked.returncode == exit_codes.OK, asked.stderr
        out = asked.stdout
        assert "sub-queries: When do I fly | what class did I book" in out
        assert "empty parts  0 found nothing; 1 answered by one more try" in out
        assert _section(out, "Flights booked to Italy") == "EPISODIC"  # the event is an episode
        assert _section(out, "Seat on planes") == "KNOWLEDGE"          # a preference is knowledge
        assert _section(out, "Renew passport") == "SIGNALS"            # a reminder is a signal

        sent = _ferret(env, "query", "-n", NAMESPACE, "How do I make the risotto?", "--wait", "0", "--json")
        assert sent.returncode == exit_codes.OK, sent.stderr
        job_id = json.loads(sent.stdout)["job_id"]
        assert wait_until(lambda: _ferret(env, "result", job_id).returncode == exit_codes.OK, 30)
        result = _ferret(env, "result", job_id)
        assert "PROCEDURAL" in result.stdout and "[recipe · PROCEDURAL] Mushroom risotto" in result.stdout
        assert "intents: KNOWLEDGE,PROCEDURAL" in result.stdout
        trace = _ferret(env, "trace", job_id)
        assert trace.returncode == 0 and "search.sub_query" in trace.stdout and "merge" in trace.stdout

        lines = [{"query": "What wine does Anna prefer?", "namespace": NAMESPACE, "request_id": "wine"},
                 {"query": "What do I need to do before the Rome trip?", "namespace": NAMESPACE,
                  "request_id": "todo"},
                 {"query": "Quelle est la recette de la focaccia ?", "namespace": NAMESPACE, "request_id": "fr"}]
        requests = tmp_path / "questions.jsonl"
        requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
        answers = tmp_path / "answers.jsonl"
        batch = _ferret(env, "batch", str(requests), "--out", str(answers))
        assert batch.returncode == 0, batch.stderr
        assert re.search(r"3 requests \(new run run-[0-9a-f]+\): ok 3;", batch.stderr), batch.stderr
        got = {row["request_id"]: row for row in map(json.loads, answers.read_text().splitlines())}
        assert got["wine"]["stats"]["intents"] == ["KNOWLEDGE"]
        assert (got["wine"]["results"][0]["title"], got["wine"]["results"][0]["section"]) == ("Anna's wine",
                                                                                             "KNOWLEDGE")
        assert got["todo"]["stats"]["intents"] == ["SIGNALS"]
        assert (got["todo"]["results"][0]["title"], got["todo"]["results"][0]["section"]) == ("Renew passport",
                                                                                             "SIGNALS")
        assert got["fr"]["stats"]["intents"] == ["PROCEDURAL"]
        assert ("Focaccia", "PROCEDURAL") in {(r["title"], r["section"]) for r in got["fr"]["results"]}

        refused = _ferret(env, "redis", "stop")
        assert refused.returncode == exit_codes.USAGE
        assert "1 worker(s) are connected" in refused.stderr and "or pass --force" in refused.stderr
    finally:
        worker.send_signal(signal.SIGTERM)
        _, worker_log = worker.communicate(timeout=60)
    assert "stopped (SIGTERM: the job in hand, if any, finished first) after 5 job(s)" in worker_log
    assert "How do I make" not in worker_log and "Anna" not in worker_log  # the log never prints a query

    stop = _ferret(env, "redis", "stop")
    assert stop.returncode == 0, stop.stderr
    assert "stopping the embedded Redis (0 other client(s) connected): saving its data ..." in stop.stderr
    assert "stopped the embedded Redis in" in stop.stdout
    assert "not running" in _ferret(env, "redis", "status").stdout
