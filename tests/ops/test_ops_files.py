"""Static checks of ops/ and the Dockerfile: promtool, hadolint, the compose schema."""

from __future__ import annotations

import json
import re
import subprocess

import jsonschema
import yaml

from ferret.settings import load_settings
from tests.conftest import ROOT
from tests.ops.conftest import OPS, tool

PROMETHEUS = OPS / "prometheus"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_prometheus_config_and_rules_are_valid():
    checked = _run(tool("promtool"), "check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = _run(tool("promtool"), "check", "rules", str(PROMETHEUS / "ferret-alerts.yml"))
    assert rules.returncode == 0 and "9 rules found" in rules.stdout, rules.stdout + rules.stderr


def test_alert_rule_unit_tests_pass():
    result = _run(tool("promtool"), "test", "rules", str(PROMETHEUS / "ferret-alerts.test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_named_in_the_issue_exists():
    groups = yaml.safe_load((PROMETHEUS / "ferret-alerts.yml").read_text())["groups"]
    names = {rule["alert"] for group in groups for rule in group["rules"]}
    assert names == {"FerretHighFailureRatio", "FerretDeadlineMissRatio", "FerretRetryRateSpike",
                     "FerretBacklogGrowing", "FerretNoWorkerUp", "FerretRefusedQueueEntries",
                     "FerretAgentFallbackRatio", "FerretHttpServerErrors", "FerretHttpRefusalSpike"}


def test_dockerfile_lints_clean():
    result = _run(tool("hadolint"), str(ROOT / "Dockerfile"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_is_slim_non_root_with_healthcheck():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"^USER (?!root|0\b)\S+", text, re.M)
    assert "HEALTHCHECK" in text and "-r requirements.lock" in text


def test_compose_file_matches_the_compose_schema(compose_schema):
    compose = yaml.safe_load((OPS / "docker-compose.yml").read_text())
    jsonschema.Draft7Validator(compose_schema).validate(compose)  # the spec is draft-07
    services = compose["services"]
    assert {"redis", "worker", "api", "prometheus", "grafana"} <= set(services)
    for name in ("redis", "worker", "api"):  # a worker or Redis that dies comes back by itself
        assert services[name].get("restart") in {"always", "unless-stopped", "on-failure"}, name


def test_compose_wiring_matches_prometheus_and_settings():
    compose = yaml.safe_load((OPS / "docker-compose.yml").read_text())
    worker = compose["services"]["worker"]
    port = worker["command"][worker["command"].index("--metrics-port") + 1]
    scrape = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["job_name"] == "ferret-workers" and str(scrape["dns_sd_configs"][0]["port"]) == port
    api = compose["services"]["api"]
    http = next(job for job in yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())["scrape_configs"]
                if job["job_name"] == "ferret-http")
    assert api["command"][:2] == ["ferret", "serve"]
    assert str(http["dns_sd_configs"][0]["port"]) == api["command"][api["command"].index("--port") + 1]
    assert http["dns_sd_configs"][0]["names"] == ["api"] and http["metrics_path"] == "/metrics"
    grace = re.fullmatch(r"(\d+)m", worker["stop_grace_period"])
    service = load_settings(environ={}).service
    assert grace and int(grace.group(1)) * 60 > service.batch_deadline_seconds + service.hard_timeout_grace_seconds


def test_dashboard_is_provisioned_and_every_panel_has_a_query():
    dashboard = json.loads((OPS / "grafana" / "dashboards" / "ferret.json").read_text())
    datasource = yaml.safe_load((OPS / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    titles = [panel["title"] for panel in dashboard["panels"]]
    for wanted in ("Throughput", "latency percentiles", "Queue wait", "Stage latency", "Retry rate",
                   "Replacement rate", "Decomposition rate", "Deadline misses", "Backlog",
                   "HTTP API: requests per second by route and status", "HTTP API: latency percentiles",
                   "HTTP API: refusals per second by reason", "HTTP API: waits in flight", "Store mismatches"):
        assert any(wanted.lower() in title.lower() for title in titles), wanted
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == uid and panel["targets"]
        assert all(target["expr"].strip() for target in panel["targets"])


def test_compose_bounds_the_cache_and_never_evicts_data():
    compose = yaml.safe_load((OPS / "docker-compose.yml").read_text())
    worker_env = compose["services"]["worker"]["environment"]
    settings = load_settings(environ={k: str(v) for k, v in worker_env.items()})  # every variable is a real setting
    assert settings.cache.max_entries == 20_000 and settings.cache.ttl_for("nous") <= 60
    redis_command = compose["services"]["redis"]["command"]
    assert redis_command[redis_command.index("--maxmemory-policy") + 1] == "noeviction"
