"""The kernel and the producer depend on nothing of the worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

KERNEL = ["ferret.settings", "ferret.contract", "ferret.keys", "ferret.errors", "ferret.records", "ferret.tracing",
          "ferret.job_ids", "ferret.results", "ferret.cache", "ferret.ingest", "ferret.redis_conn"]


@pytest.mark.parametrize("module", [*KERNEL, "ferret", "producer.client", "producer.batch", "producer.api"])
def test_importing_it_imports_no_worker_module(module):
    probe = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'worker'))")
    imported = subprocess.run([sys.executable, "-c", probe, module], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


def _importing(pattern: str, tops: tuple[str, ...]) -> list[str]:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = re.compile(pattern, re.MULTILINE)
    return sorted(str(path.relative_to(root)) for top in tops for path in (root / top).rglob("*.py")
                  if found.search(path.read_text()))


def test_only_the_rq_wing_imports_rq():
    outside = ("ferret", "worker", "producer", "ferret_cli", "benchmarks")
    assert _importing(r"^\s*(?:from rq\b|import rq\b)", outside) == []


def test_no_kernel_module_imports_the_worker_the_wing_or_the_shell():
    found = _importing(r"^\s*(?:from|import) (?:worker|rq_wing|producer|ferret_cli|benchmarks)\b", ("ferret",))
    assert found == ["ferret/__init__.py"]  # the package's facade, ``ferret.connect``, and nothing else


def test_the_facade_imports_the_client_only_when_called():
    probe = ("import sys, ferret; print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('producer', 'worker', 'rq', 'rq_wing')))")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout
