"""Ferret outside its checkout: the sdist and the wheel built from exactly the files the Dockerfile's build stage
copies, the wheel holding ``ferret/`` and its metadata only, installed with the image's pinned lock file into a
fresh venv, then used from an application directory that has its own ``worker.py``, ``producer.py`` and
``benchmarks.py``: ``ferret demo``, and ``ferret.connect()`` / ``remember()`` / ``query()`` against a real
``ferret worker`` (of that venv) on a real redis-server. Slow (a venv and its packages): one module fixture."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

# Modules an application may well have of its own; each refuses to be imported by Ferret.
APP_MODULES = ("worker", "producer", "benchmarks", "rq_wing", "ferret_cli")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    sdist: Path
    python: Path
    ferret: Path
    app: Path


def build_stage_copies(dockerfile: str) -> list[tuple[str, str]]:
    """(source, destination) of every COPY from the build context in the Dockerfile's first (build) stage."""
    first_stage = dockerfile.split("\nFROM ", 2)[1]
    copies = re.findall(r"^COPY (?!--from)(.+)$", first_stage, re.MULTILINE)
    pairs = []
    for line in copies:
        *sources, destination = line.split()
        pairs.extend((source, destination) for source in sources)
    return pairs


def _copy_build_context(into: Path) -> None:
    for source, destination in build_stage_copies((ROOT / "Dockerfile").read_text()):
        target = into / destination if destination not in ("./", ".") else into / Path(source).name
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / source, target)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("packaging")
    context, dist = base / "context", base / "dist"
    context.mkdir()
    _copy_build_context(context)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(context)],
                   check=True, capture_output=True, timeout=600)
    wheel, = dist.glob("ferret_memory-*.whl")
    sdist, = dist.glob("ferret_memory-*.tar.gz")
    environment = base / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    for step in (["-r", str(ROOT / "requirements.lock")], ["--no-deps", str(wheel)]):
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *step],
                       check=True, capture_output=True, timeout=900)
    app = base / "app"
    app.mkdir()
    for name in APP_MODULES:
        (app / f"{name}.py").write_text(f'raise ImportError("Ferret imported the application\'s own {name}.py")\n')
    return Installed(wheel, sdist, python, environment / "bin" / "ferret", app)


def _clean_env(app: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("FERRET_", "PYTHON", "VIRTUAL_ENV"))}
    return {**keep, "PYTHONPATH": str(app), "HOME": str(app), **extra}


def test_the_wheel_holds_one_top_level_package_and_its_metadata(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
        names = wheel.namelist()
    assert tops == {"ferret", "ferret_memory-0.1.0.dist-info"}, tops
    assert "ferret/worker/pipeline/orchestrator.py" in names and "ferret/producer/api.py" in names
    assert not any(name.startswith("ferret/benchmarks") or "/tests/" in name for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as wheel:
        assert "ferret = ferret.cli.main:cli" in wheel.read(entry_points).decode()


def test_the_demo_runs_from_an_application_with_its_own_worker_module(installed):
    done = subprocess.run([str(installed.ferret), "demo"], cwd=installed.app, env=_clean_env(installed.app),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Ferret imported the application" not in done.stdout + done.stderr


def test_the_python_client_remembers_and_queries_through_a_worker_of_the_wheel(installed, redis_server,
                                                                            tmp_path):
    env = _clean_env(installed.app, FERRET_REDIS__URL=redis_server.url)
    worker = subprocess.Popen([str(installed.ferret), "worker", "-q"], cwd=installed.app, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    script = installed.app / "agent.py"
    script.write_text(textwrap.dedent("""
        import ferret

        client = ferret.connect()
        client.remember("app", [{"id": "m1", "type": "event", "content_title": "Flight to Rome",
                                 "content_body": "Booked the flight to Rome for 14 March, window seat."}])
        result = client.query("When do I fly to Rome?", "app", timeout=60)
        print(result.status, [hit.id for hit in result.results])
    """))
    try:
        done = subprocess.run([str(installed.python), str(script)], cwd=installed.app, env=env,
                              capture_output=True, text=True, timeout=180)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            out, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
    assert done.returncode == 0, done.stdout + done.stderr + out.decode()[-2000:]
    assert done.stdout.split() == ["ok", "['m1']"], done.stdout


def test_the_applications_own_worker_module_stays_its_own(installed):
    probe = ("import importlib.util, ferret.cli.main, ferret.worker.core.run, ferret.producer.api; "
             "print(importlib.util.find_spec('worker').origin)")
    done = subprocess.run([str(installed.python), "-c", probe], cwd=installed.app, env=_clean_env(installed.app),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(installed.app / "worker.py")


def test_the_build_stage_copies_the_three_package_folders():
    copied = {source for source, _ in build_stage_copies((ROOT / "Dockerfile").read_text())}
    assert {"ferret", "worker", "producer", "pyproject.toml"} <= copied


def test_the_listed_packages_are_every_folder_of_the_three_trees():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in (("ferret", "ferret"), ("worker", "ferret.worker"), ("producer", "ferret.producer")):
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *parts)))
    assert listed == found
