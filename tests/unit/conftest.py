"""Unit tests never reach the network: only unix sockets may connect."""

from __future__ import annotations

import socket

import pytest

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address):  # type: ignore[no-untyped-def]
    if self.family == socket.AF_UNIX:
        return _real_connect(self, address)
    raise RuntimeError(f"unit tests must not use the network (tried {address!r})")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


def pytest_collection_modifyitems(items):  # type: ignore[no-untyped-def]
    for item in items:
        if "/unit/" in str(item.fspath):
            item.add_marker(pytest.mark.unit)
