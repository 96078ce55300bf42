"""What ``ferret serve`` refuses, each counted by reason and nothing written: no key, a wrong key, a revoked
key, another namespace's key, a read-only key writing, an oversized body, a body that never comes, a key in a
URL, a key past its rate; and 1,000 slow-loris sockets closed while real requests are still answered. A key
never shows in the server's log."""

from __future__ import annotations

import re
import resource
import socket
import subprocess
import sys

import httpx
import pytest

from tests.conftest import wait_until
from tests.integration.http_support import bearer, closed_by_the_server, make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.reliability

MEMORY = {"memories": [{"id": "m1", "content_body": "a note"}]}


def _refusals(url: str) -> dict[str, float]:
    found = re.findall(r'^ferret_http_refusals_total\{reason="(\w+)"\} ([0-9.]+)$',
                       httpx.get(f"{url}/metrics").text, re.MULTILINE)
    return {reason: float(count) for reason, count in found}


def _memory_keys(redis_client) -> list[bytes]:
    return list(redis_client.scan_iter(b"ferret:ns:*"))


def test_each_refusal_is_counted_and_writes_nothing(env, serve, redis_client):  # noqa: F811
    served = serve(extra_env={"FERRET_HTTP__MAX_BODY_BYTES": "4096", "FERRET_HTTP__BODY_TIMEOUT_SECONDS": "1"})
    alice = make_key(env, "-n", "alice")
    bob = make_key(env, "-n", "bob")
    reader = make_key(env, "-n", "alice", "--read-only")
    revoked = make_key(env, "-n", "alice")
    revoked_id = revoked.split("_")[1]
    assert subprocess.run([sys.executable, "-m", "ferret.cli.main", "keys", "revoke", revoked_id], env=env,
                          capture_output=True, timeout=60).returncode == 0
    write = f"{served.url}/v1/namespaces/alice/memories"
    cases = [
        ("no_key", 401, {}, write, MEMORY),
        ("bad_key", 401, bearer(alice[:-4] + "AAAA"), write, MEMORY),
        ("bad_key", 401, bearer("not-a-key"), write, MEMORY),
        ("revoked_key", 401, bearer(revoked), write, MEMORY),
        ("other_namespace", 403, bearer(bob), write, MEMORY),
        ("read_only", 403, bearer(reader), write, MEMORY),
        ("too_large", 413, bearer(alice), write, {"memories": [{"id": "big", "content_body": "x" * 5000}]}),
        ("key_in_url", 400, {}, f"{write}?key={alice}", MEMORY),
        ("key_in_url", 400, {}, f"{write}?api_key=whatever", MEMORY),
    ]
    for reason, status, headers, url, body in cases:
        answered = httpx.post(url, headers=headers, json=body, timeout=30)
        assert answered.status_code == status, (reason, answered.text)
        assert answered.json()["error"]["code"] == reason
        if status == 401:
            assert answered.headers["www-authenticate"].startswith("Bearer")
    counted = _refusals(served.url)
    for reason, _, _, _, _ in cases:
        assert counted[reason] == sum(1 for case in cases if case[0] == reason), (reason, counted)
    assert _memory_keys(redis_client) == []

    # a body announced and never sent is refused once body_timeout_seconds pass, and the socket closed
    with socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(b"POST /v1/namespaces/alice/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + alice.encode() + b"\r\nContent-Length: 100\r\n\r\n{\"memo")
        sock.settimeout(30)
        assert sock.recv(1024).startswith(b"HTTP/1.1 408")
    assert _refusals(served.url)["body_too_slow"] == 1
    assert _memory_keys(redis_client) == []

    # the same write with the right key goes through
    assert httpx.post(write, headers=bearer(alice), json=MEMORY).json() == {"written": 1}
    logged = served.logged()
    for key in (alice, bob, reader, revoked):
        assert key not in logged and key.split("_", 2)[2] not in logged  # the secret may hold "_" itself


def test_a_key_past_its_rate_waits_its_turn(env, serve, redis_client):  # noqa: F811
    served = serve()
    key = make_key(env, "-n", "alice", "--rate", "5/minute")
    other = make_key(env, "-n", "alice")
    url = f"{served.url}/v1/namespaces/alice/conversations/c/context"
    statuses = [httpx.get(url, headers=bearer(key)) for _ in range(8)]
    assert [s.status_code for s in statuses] == [200] * 5 + [429] * 3
    assert 1 <= int(statuses[-1].headers["retry-after"]) <= 60
    assert httpx.get(url, headers=bearer(other)).status_code == 200  # the limit is the key's, not everyone's
    assert _refusals(served.url)["rate_limited"] == 3


def test_a_thousand_slow_loris_sockets_are_closed_and_requests_still_served(env, serve, redis_client):  # noqa: F811
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and (hard == resource.RLIM_INFINITY or hard > soft):  # this process holds 1,000 sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096 if hard == resource.RLIM_INFINITY else min(4096, hard), hard))
    served = serve(extra_env={"FERRET_HTTP__HEAD_TIMEOUT_SECONDS": "2"})
    key = make_key(env, "-n", "alice")
    port = int(served.url.rsplit(":", 1)[1])
    sockets: list[socket.socket] = []
    try:
        for n in range(1000):
            sock = socket.create_connection(("127.0.0.1", port))
            if n % 2:
                sock.sendall(b"GET /v1/namespaces/alice/conversations/c/context HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            sockets.append(sock)
        answered = httpx.get(f"{served.url}/v1/namespaces/alice/conversations/c/context", headers=bearer(key),
                             timeout=30)
        assert answered.status_code == 200 and answered.json() == {**answered.json(), "ready": False}
        assert wait_until(lambda: all(closed_by_the_server(s) for s in sockets), 120)
    finally:
        for sock in sockets:
            sock.close()
    assert served.process.poll() is None
    assert _refusals(served.url)["head_too_slow"] == 1000
    assert _memory_keys(redis_client) == []


def test_a_key_revoked_while_in_use_is_refused_soon_after(env, serve, redis_client):  # noqa: F811
    served = serve()
    key = make_key(env, "-n", "alice")
    url = f"{served.url}/v1/namespaces/alice/conversations/c/context"
    assert httpx.get(url, headers=bearer(key)).status_code == 200
    assert subprocess.run([sys.executable, "-m", "ferret.cli.main", "keys", "revoke", key.split("_")[1]], env=env,
                          capture_output=True, timeout=60).returncode == 0
    assert wait_until(lambda: httpx.get(url, headers=bearer(key)).status_code == 401, 30)
    assert httpx.get(url, headers=bearer(key)).json()["error"]["code"] == "revoked_key"
