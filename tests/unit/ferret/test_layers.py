"""The kernel and the producer depend on nothing of the worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

KERNEL = ["ferret.settings", "ferret.contract", "ferret.keys", "ferret.errors", "ferret.records", "ferret.tracing",
          "ferret.job_ids", "ferret.results", "ferret.cache", "ferret.ingest", "ferret.redis_conn"]


@pytest.mark.parametrize("module", [*KERNEL, "producer.client", "producer.batch"])
def test_importing_it_imports_no_worker_module(module):
    probe = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'worker'))")
    imported = subprocess.run([sys.executable, "-c", probe, module], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


def test_only_the_rq_wing_imports_rq():
    """The kernel, the worker and the producer's own modules never import rq
    (the service benchmark's raw-RQ baseline is the one exception, by design)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    importing = re.compile(r"^\s*(?:from rq\b|import rq\b)", re.MULTILINE)
    offenders = [str(path.relative_to(root)) for top in ("ferret", "worker", "producer")
                 for path in (root / top).rglob("*.py") if importing.search(path.read_text())]
    assert offenders == ["ferret/bench/service.py"], offenders
