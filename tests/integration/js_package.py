"""The JavaScript client as a Node user gets it: ``npm pack`` of clients/js, installed from that tarball into a
project of its own (with TypeScript and Node's types, to compile against it), once a test process."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool

CLIENT = ROOT / "clients" / "js"


def _dev_version(name: str) -> str:
    return str(json.loads((CLIENT / "package.json").read_text())["devDependencies"][name])


@pytest.fixture(scope="session")
def js_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Node project with the packed client, ``typescript`` and ``@types/node`` installed."""
    require_tool("node", "Node.js 18 or newer (apt-get install nodejs)")
    npm = require_tool("npm", "npm (apt-get install npm)")
    packed = tmp_path_factory.mktemp("packed")
    made = subprocess.run([npm, "pack", "--silent", "--pack-destination", str(packed)], cwd=CLIENT,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    (tarball,) = packed.glob("ferret-memory-client-*.tgz")
    project = tmp_path_factory.mktemp("node-project")
    (project / "package.json").write_text(json.dumps({"name": "an-agent", "private": True, "type": "module"}))
    installed = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefer-offline", str(tarball),
                                f"typescript@{_dev_version('typescript')}",
                                f"@types/node@{_dev_version('@types/node')}"],
                               cwd=project, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    client = project / "node_modules" / "ferret-memory-client"
    assert client.is_dir() and not client.is_symlink()  # a copy from the tarball, not a link to the checkout
    return project


def tsc(project: Path) -> str:
    found = project / "node_modules" / ".bin" / "tsc"
    assert found.exists() or shutil.which("tsc"), "typescript is installed in the project"
    return str(found)
