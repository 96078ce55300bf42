"""Shared fixtures of the contract tier."""

from __future__ import annotations

import pytest

from ferret.settings import NousSettings
from ferret.worker.backends.nous import NousBackend


@pytest.fixture
def nous(fake):
    """The real Nous client against the module's ``fake`` server."""
    client = NousBackend(NousSettings(base_url=fake.base_url, timeout_seconds=1.0))
    yield client
    client.close()
