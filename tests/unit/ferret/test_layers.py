"""One import root, layered one way: the kernel (``ferret``'s own modules) and its Redis plumbing at the bottom,
then the RQ layer, the producer and the worker, the CLI on top. The kernel and the producer depend on nothing
of the worker; only the RQ layer imports RQ."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
KERNEL = ["ferret.settings", "ferret.contract", "ferret.keys", "ferret.errors", "ferret.records", "ferret.tracing",
          "ferret.job_ids", "ferret.results", "ferret.cache", "ferret.ingest", "ferret.redis_plumbing.redis_conn"]
# The repository's folders and the packages they install as.
TREES = {"ferret": "ferret", "worker": "ferret.worker", "producer": "ferret.producer"}
UPPER = ("ferret.worker", "ferret.producer", "ferret.rq_layer", "ferret.cli", "ferret.bench", "ferret.integrations",
         "ferret.serve")


@pytest.mark.parametrize("module", [*KERNEL, "ferret", "ferret.producer.client", "ferret.producer.batch",
                                    "ferret.producer.api"])
def test_importing_it_imports_no_worker_module(module):
    probe = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.startswith('ferret.worker')))")
    imported = subprocess.run([sys.executable, "-c", probe, module], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


@pytest.mark.parametrize("module", ["ferret.worker.backends.writers", "ferret.worker.backends.local"])
def test_a_process_that_only_writes_memories_loads_no_search_engine(module):
    """An agent's ``remember`` and ``ferret ingest`` write through these: tantivy, numpy and the HTTP client
    (about 0.3 s of CPU and their memory) are loaded by what searches, embeds or speaks to Nous."""
    probe = ("import sys, importlib; importlib.import_module(sys.argv[1]); "
             "print(sorted(m for m in ('tantivy', 'numpy', 'httpx') if m in sys.modules))")
    imported = subprocess.run([sys.executable, "-c", probe, module], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


def _modules() -> dict[str, str]:
    """Every installed module's dotted name and its source."""
    found = {}
    for folder, package in TREES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path.read_text()
    return found


def _importers(pattern: str, of: tuple[str, ...]) -> list[str]:
    wanted = re.compile(pattern, re.MULTILINE)
    return sorted(name for name, text in _modules().items()
                  if name.startswith(of) and wanted.search(text))


def test_only_the_rq_layer_imports_rq():
    everyone = ("ferret",)
    importers = _importers(r"^\s*(?:from rq\b|import rq\b)", everyone)
    assert [name for name in importers if not name.startswith("ferret.rq_layer")] == []


def test_no_kernel_module_imports_the_layers_above_it():
    kernel = [name for name in _modules() if name.startswith("ferret") and not name.startswith(UPPER)]
    upward = re.compile(r"^\s*(?:from|import) (?:" + "|".join(re.escape(u) for u in UPPER) + r")\b", re.MULTILINE)
    found = sorted(name for name in kernel if upward.search(_modules()[name]))
    assert found == ["ferret"]  # the package's facade, ``ferret.connect``, and nothing else


def test_the_redis_plumbing_imports_nothing_of_the_domain_but_errors_and_settings():
    plumbing = [name for name in _modules() if name.startswith("ferret.redis_plumbing")]
    allowed = ("ferret.redis_plumbing", "ferret.errors", "ferret.settings")
    for name in plumbing:
        for imported in re.findall(r"^\s*(?:from|import) (ferret[\w.]*)", _modules()[name], re.MULTILINE):
            assert imported.startswith(allowed), (name, imported)


def test_the_facade_imports_the_client_only_when_called():
    probe = ("import sys, ferret; print(sorted(m for m in sys.modules if m.split('.')[0] == 'rq' or "
             "m.startswith(('ferret.producer', 'ferret.worker', 'ferret.rq_layer'))))")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout


def test_the_install_claims_one_top_level_name():
    """``import worker`` (an application's own worker.py) is the application's: Ferret installs ``ferret`` only."""
    probe = "import importlib.util as u; print([n for n in ('worker', 'producer', 'rq_wing', 'ferret_cli', " \
            "'benchmarks') if u.find_spec(n)])"
    outside = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    assert outside.stdout.strip() == "[]", outside.stdout


def _imports_of(name: str, text: str, known: dict[str, str]) -> set[str]:
    """The Ferret modules ``text`` imports, lazily too; the package's facade (``ferret``) left out."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ferret"):
            if node.module in known and node.module != "ferret":
                found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
    return found - {name}


def test_no_modules_import_each_other_even_lazily():
    known = _modules()
    graph = {name: _imports_of(name, text, known) for name, text in known.items()}
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        seen[name] = 1
        for other in sorted(graph[name]):
            assert seen.get(other) != 1, " -> ".join([*path, name, other])
            if other not in seen:
                visit(other, [*path, name])
        seen[name] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name, [])


def test_the_agent_turn_probe_imports_resolve_from_the_project_root():
    """The probe the issues measure an agent's turn with (``../shared/probes/agent_turns.py``, run from the
    project root with it on the path) imports by the names modules had when it was written: ``client_for``
    from ``ferret.redis_conn``, ``Producer`` from the ``producer`` folder. They are today's objects."""
    probe = ("from ferret.redis_conn import client_for; from producer import Producer; "
             "from ferret.records import Memory; from ferret.settings import load_settings; "
             "import ferret.redis_plumbing.redis_conn as conn, ferret.producer.client as client; "
             "print(client_for is conn.client_for, Producer is client.Producer)")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert imported.stdout.split() == ["True", "True"], imported.stdout + imported.stderr
