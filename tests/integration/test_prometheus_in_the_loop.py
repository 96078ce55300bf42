"""The real Prometheus binary scrapes real workers; every PromQL expression the
dashboard and the alert rules use must evaluate without error and return series."""

from __future__ import annotations

import json
import re
import subprocess
import time

import httpx
import pytest
import yaml

from ferret.worker.fakes.chat_server import FakeChat
from tests.conftest import free_port
from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)
from tests.ops.conftest import OPS, tool

QUERIES = [
    "What's my BTC thesis and how did my last SOL trade go?",
    "the plan for tomorrow's coffee with Anna about ETH",  # weak: retried with the entity
    "what signals are firing right now?",
    "funding squeeze playbook",
]
COMPARISON = re.compile(r"\s(?:>=|<=|==|!=|>|<)\s")


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((OPS / "grafana" / "dashboards" / "ferret.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def alert_expressions() -> list[str]:
    """Each alert's measured side: the left of every comparison (absent() is meant to be empty)."""
    groups = yaml.safe_load((OPS / "prometheus" / "ferret-alerts.yml").read_text())["groups"]
    measured = []
    for rule in (r for g in groups for r in g["rules"]):
        for piece in re.split(r"\s(?:and|or|unless)\s", " ".join(rule["expr"].split())):
            piece = piece.strip()
            if piece.startswith("absent("):
                continue
            measured.append(COMPARISON.split(piece, maxsplit=1)[0].strip())
    return measured


@pytest.fixture
def prometheus(tmp_path):
    started: list[subprocess.Popen[bytes]] = []

    def start(targets: list[str], http_targets: tuple[str, ...] = ()) -> str:
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(OPS / "prometheus" / "ferret-alerts.yml")],
            "scrape_configs": [{"job_name": "ferret-workers", "static_configs": [{"targets": targets}]},
                               *([{"job_name": "ferret-http", "metrics_path": "/metrics",
                                   "static_configs": [{"targets": list(http_targets)}]}] if http_targets else [])],
        }
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        process = subprocess.Popen(
            [tool("prometheus"), f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=20)


def _query(url: str, expr: str) -> dict:
    response = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    return response.json()


def test_every_dashboard_and_alert_expression_returns_series(
        prometheus, producer, sample_namespace, start_workers, request, env, serve):  # noqa: F811
    ports = [free_port(), free_port()]
    chat = FakeChat(favourite={"btc"})  # an outside endpoint: its circuit's series
    request.addfinalizer(chat.close)
    for port in ports:
        start_workers(1, "--metrics-port", str(port),
                      extra_env={"FERRET_RERANK__ENABLED": "true", "FERRET_RERANK__BASE_URL": chat.base_url})
    served = serve()  # the HTTP API too: a success, a refusal and a wait that ran out (504)
    key = make_key(env, "-n", sample_namespace)
    url = prometheus([f"127.0.0.1:{port}" for port in ports], (served.url.removeprefix("http://"),))
    api = f"{served.url}/v1/namespaces/{sample_namespace}"
    assert httpx.get(f"{api}/conversations/c/context", headers=bearer(key), timeout=30).status_code == 200
    assert httpx.get(f"{api}/conversations/c/context", timeout=30).status_code == 401
    assert httpx.post(f"{api}/query", json={"query": "BTC thesis", "wait_seconds": 0.001}, headers=bearer(key),
                      timeout=30).status_code == 504
    handles = [producer.enqueue({"query": QUERIES[i % len(QUERIES)], "namespace": sample_namespace,
                                 "queue": "batch" if i % 3 else "prefetch"}) for i in range(40)]
    handles.append(producer.enqueue({"query": "BTC", "namespace": sample_namespace, "deadline_seconds": 0.001}))
    assert all(producer.wait(h, 30) is not None for h in handles)
    jobs_run = len({h.job_id for h in handles})  # identical prefetch requests are coalesced
    expressions = dashboard_expressions() + alert_expressions()
    deadline = time.monotonic() + 40
    while True:  # until scrapes have seen the whole batch
        jobs = _query(url, "sum(ferret_jobs_total)")["data"]["result"]
        answers = _query(url, "sum(ferret_http_requests_total)")["data"]["result"]
        if jobs and float(jobs[0]["value"][1]) >= jobs_run and answers and float(answers[0]["value"][1]) >= 3:
            break
        assert time.monotonic() < deadline, "prometheus never saw all the jobs"
        time.sleep(0.5)
    time.sleep(3)  # a few more scrapes, so rate() has points after the batch
    failures = []
    for expr in expressions:
        answer = _query(url, expr)
        if answer.get("status") != "success":
            failures.append(f"{expr}: {answer.get('error')}")
        elif not answer["data"]["result"]:
            failures.append(f"{expr}: no series")
    assert not failures, "\n".join(failures)
    assert len(expressions) >= 20
    retries = _query(url, "sum(ferret_retries_total)")["data"]["result"]
    assert float(retries[0]["value"][1]) > 0
