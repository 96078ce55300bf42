"""The ferret command line, run as a user would run it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import SAMPLE


def _ferret(args, env, **kw):
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=120, **kw)


def test_ingest_and_run_on_embedded_redis(tmp_path, embedded_env):
    corpus = tmp_path / "memories.jsonl"
    corpus.write_text(SAMPLE.read_text() + '{"id": "broken", \n{"content_title": "no id"}\n')
    ingest = _ferret(["ingest", str(corpus), "--namespace", "t"], embedded_env)
    assert ingest.returncode == 1
    assert "stored 22 memories" in ingest.stdout
    assert "line 23" in ingest.stderr and "line 24: id" in ingest.stderr
    run = _ferret(["run", "What's my BTC thesis and how did my last SOL trade go?", "-n", "t", "--json"], embedded_env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    stats = doc["stats"]
    assert doc["status"] == "ok" and stats["was_decomposed"] and len(stats["sub_queries"]) == 2
    for key in ("retries", "replacements_attempted", "replacements_successful", "route", "stage_ms"):
        assert key in stats
    assert {r["sub_query"] for r in doc["results"]} == {0, 1}
    assert doc["trace"]["spans"]
    table = _ferret(["run", "funding squeeze playbook", "-n", "t"], embedded_env)
    assert "Playbook: funding squeeze short" in table.stdout and "stage ms" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", ""], "query: must not be empty"),
        (["run", "x" * 100_000], "query: is 100000 characters"),
        (["run", "BTC", "--filters", '{"colour": "red"}'], "filters.colour: unknown field"),
        (["run", "BTC", "--since", "yesterday-ish"], "filters.time_range.start"),
        (["run", "BTC", "-n", "a/b"], "namespace"),
    ],
)
def test_bad_input_gets_a_clear_error(embedded_env, args, message):
    result = _ferret(args, embedded_env)
    assert result.returncode == 2 and message in result.stderr


def test_query_result_and_trace_commands(env, sample_namespace, start_workers):
    start_workers(1)
    out = _ferret(["query", "BTC and SOL analysis", "-n", sample_namespace, "--json"], env)
    doc = json.loads(out.stdout)
    assert doc["status"] == "ok"
    shown = _ferret(["result", doc["job_id"]], env)
    assert "MODERATE" in shown.stdout and "context:" in shown.stdout
    drawn = _ferret(["trace", doc["job_id"]], env)
    assert drawn.returncode == 0 and "search.sub_query[1]" in drawn.stdout and "queue_wait" in drawn.stdout


def test_batch_resumes_after_the_producer_is_killed(tmp_path, env, sample_namespace, start_workers):
    lines = [json.dumps({"query": f"BTC thesis {i}" if i % 2 else f"What's my BTC thesis and how did SOL {i} go?",
                         "namespace": sample_namespace}) for i in range(300)]
    lines.insert(150, '{"query": ""}')
    source = tmp_path / "queries.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    start_workers(1)
    first = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out", str(out)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 40):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    written_before = len(out.read_text().splitlines())
    assert 0 < written_before < 301
    resumed = _ferret(["batch", str(source), "--out", str(out), "--resume"], env)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ids = [r["request_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 301, "every line exactly once"
    assert sum(r["status"] == "ok" for r in rows) == 300
    assert next(r for r in rows if r["status"] == "failed")["error"].startswith("invalid request: query")
    assert summary["skipped_done"] == written_before
    # progress on stderr, both phases: every line through enqueue, every enqueued job's result by status
    assert re.search(r"enqueue\s.*\b301/301\b", resumed.stderr), resumed.stderr
    collected = re.search(r"results\s.*\b(\d+)/(\d+)\b.*\bok (\d+)", resumed.stderr)
    assert collected and collected.group(1) == collected.group(2) == collected.group(3) == str(summary["enqueued"])


def test_no_cache_on_query_and_batch(tmp_path, env, sample_namespace, start_workers):
    start_workers(1)
    assert _ferret(["query", "BTC thesis", "-n", sample_namespace, "--json"], env).returncode == 0  # now cached
    fresh = json.loads(_ferret(["query", "BTC thesis", "-n", sample_namespace, "--no-cache", "--json"], env).stdout)
    assert fresh["status"] == "ok" and "cache_hit" not in fresh["stats"]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"query": "BTC thesis", "namespace": sample_namespace}) + "\n"
                      + json.dumps({"query": "BTC thesis", "namespace": sample_namespace,
                                    "options": {"cache": True}}) + "\n")
    done = _ferret(["batch", str(source), "--out", str(out), "--no-cache", "--wait", "30"], env)
    assert done.returncode == 0, done.stderr
    rows = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda row: row["line"])
    assert "cache_hit" not in rows[0]["stats"] and rows[1]["stats"]["cache_hit"] is True  # a line's own choice wins


def test_history_resolves_references_through_a_worker(env, sample_namespace, start_workers):
    start_workers(1)
    asked = _ferret(["query", "and how did the other one go?", "-n", sample_namespace, "--no-cache",
                     "--history", "What's my BTC thesis and my SOL thesis?", "--history", "Tell me more about BTC",
                     "--json"], env)
    assert asked.returncode == 0, asked.stderr
    doc = json.loads(asked.stdout)
    assert doc["stats"]["rewritten_query"] == "and how did SOL go?" and doc["stats"]["references_resolved"] == 1
    assert any("SOL" in r["title"] for r in doc["results"][:3])
    plain = json.loads(_ferret(["query", "and how did the other one go?", "-n", sample_namespace, "--no-cache",
                                "--json"], env).stdout)
    assert "rewritten_query" not in plain["stats"]
    trivial = json.loads(_ferret(["query", "thanks!", "-n", sample_namespace, "--json"], env).stdout)
    assert (trivial["status"], trivial["results"], trivial["stats"]["route"], trivial["stats"]["trivial"]) == \
        ("ok", [], "TRIVIAL", "trivial")


def test_control_characters_in_stored_memories_never_reach_the_terminal_raw(env, redis_client, start_workers):
    """Memories written past `ferret ingest` (straight into the store, or by a Nous server) are
    shown escaped by `ferret run`, `ferret query` and `ferret result`; JSON output escapes them too."""
    from ferret.records import Memory
    from ferret.worker.backends.local import MemoryStore

    hostile = "[bold]markup[/bold] \x1b[31mred\x1b]0;retitled\x07 bell\x00 nul \x9b2J"
    MemoryStore(redis_client, "ctl").upsert([Memory(id="m1", content_title=f"solana {hostile}",
                                                   content_body=f"solana staking {hostile}")])
    start_workers(1)
    shown = [_ferret(["run", "solana staking", "-n", "ctl"], env),
             _ferret(["query", "solana staking", "-n", "ctl", "--no-cache"], env)]
    job = re.search(r"job (\S+)", shown[1].stdout)
    assert job is not None, shown[1].stdout
    shown.append(_ferret(["result", job.group(1)], env))
    shown.append(_ferret(["query", "solana staking", "-n", "ctl", "--json"], env))
    for out in shown:
        assert out.returncode == 0, out.stderr
        assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", out.stdout + out.stderr), out.stdout
    assert "\\x1b[31mred" in shown[0].stdout and "[bold]markup[/bold]" in shown[0].stdout
    assert "\\x1b[31mred" in shown[2].stdout  # the context too
