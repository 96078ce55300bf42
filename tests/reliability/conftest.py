"""Reliability tests use the integration fixtures: real Redis, real workers."""

from __future__ import annotations

import pytest

from tests.integration.conftest import env, producer, sample_namespace, settings, start_workers  # noqa: F401


def pytest_collection_modifyitems(items):  # type: ignore[no-untyped-def]
    for item in items:
        if "/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
