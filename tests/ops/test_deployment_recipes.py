"""The deployment recipes of docs/guides/deployment.md, each checked by something that runs here: the systemd
unit by ``systemd-analyze verify``, the supervisor program by a real supervisord that starts two real workers on
a real redis-server and stops them, the Kubernetes manifests by kubernetes-validate (strict)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import redis
import yaml
from rq import Worker

from tests.conftest import require_tool, wait_until
from tests.ops.conftest import OPS

pytestmark = pytest.mark.integration

INSTALLED = "/opt/ferret/venv/bin/ferret"  # where the recipes expect Ferret (its wheel in a venv)


def _ferret() -> str:
    found = shutil.which("ferret") or str(Path(sys.executable).with_name("ferret"))
    assert Path(found).exists(), "the ferret command is not installed"
    return found


def test_the_systemd_unit_verifies_clean(tmp_path):
    analyze = require_tool("systemd-analyze", "apt-get install systemd")
    unit = (OPS / "systemd" / "ferret-worker@.service").read_text()
    assert INSTALLED in unit
    (tmp_path / "ferret-worker@.service").write_text(unit.replace(INSTALLED, _ferret()))
    verified = subprocess.run([analyze, "verify", str(tmp_path / "ferret-worker@.service")],
                              capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and not verified.stdout.strip() and not verified.stderr.strip(), \
        verified.stdout + verified.stderr


def test_the_kubernetes_manifests_validate_strictly():
    documents = [(path, doc) for path in sorted((OPS / "kubernetes").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text()) if doc]
    kinds = {doc["kind"] for _, doc in documents}
    assert {"Deployment", "HorizontalPodAutoscaler", "ConfigMap", "Service", "PodDisruptionBudget"} <= kinds
    for _, doc in documents:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    autoscaler = next(doc for _, doc in documents if doc["kind"] == "HorizontalPodAutoscaler")
    scaled_on = {m["external"]["metric"]["name"] for m in autoscaler["spec"]["metrics"]}
    assert scaled_on == {"ferret_queue_depth", "ferret_queue_oldest_wait_seconds"}  # the workers' own gauges
    worker = next(doc for _, doc in documents if doc["kind"] == "Deployment")
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 602  # the longest job


def test_supervisord_runs_two_workers_from_the_program_and_stops_them(tmp_path, redis_server):
    supervisord = shutil.which("supervisord") or str(Path(sys.executable).with_name("supervisord"))
    if not Path(supervisord).exists():
        pytest.fail("supervisord is not installed (the test extra installs supervisor)")
    program = (OPS / "supervisor" / "ferret.conf").read_text()
    assert INSTALLED in program and 'FERRET_REDIS__URL="redis://127.0.0.1:6379/0"' in program
    program = (program.replace(INSTALLED, _ferret())
               .replace('FERRET_REDIS__URL="redis://127.0.0.1:6379/0"', f'FERRET_REDIS__URL="{redis_server.url}"')
               .replace("/var/log/ferret/", f"{tmp_path}/"))
    (tmp_path / "ferret.conf").write_text(program)
    (tmp_path / "supervisord.conf").write_text(
        f"[supervisord]\nnodaemon=true\nlogfile={tmp_path}/supervisord.log\npidfile={tmp_path}/supervisord.pid\n"
        f"[unix_http_server]\nfile={tmp_path}/supervisor.sock\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{tmp_path}/supervisor.sock\n"
        f"[include]\nfiles = {tmp_path}/ferret.conf\n")
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    daemon = subprocess.Popen([supervisord, "-c", str(tmp_path / "supervisord.conf")])
    try:
        assert wait_until(lambda: Worker.count(connection=client) == 2, 60), \
            (tmp_path / "supervisord.log").read_text()[-2000:]
        ctl = shutil.which("supervisorctl") or str(Path(sys.executable).with_name("supervisorctl"))
        stopped = subprocess.run([ctl, "-c", str(tmp_path / "supervisord.conf"), "stop", "all"],
                                 capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert wait_until(lambda: Worker.count(connection=client) == 0, 30)  # each stopped warm, deregistered
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        client.close()
