"""The MCP tools at ``ferret serve``'s ``/mcp`` behind keys, through the MCP SDK's own client: each key's
namespace is the one its tools read and write; no key, no tools. And HTTPS: the server serves TLS given a
certificate and key, and refuses plain HTTP on a non-loopback address unless a TLS proxy is said to be in
front."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration


async def _as(url: str, key: str | None, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    headers = bearer(key) if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def test_mcp_tools_behind_keys_use_the_keys_namespace(env, start_workers, serve, redis_client):  # noqa: F811
    start_workers(1)
    served = serve()
    url = f"{served.url}/mcp"
    alice, bob = make_key(env, "-n", "alice"), make_key(env, "-n", "bob")
    both = make_key(env, "-n", "alice", "-n", "bob")
    memory = {"id": "rome", "type": "plan", "content_body": "Flight to Rome on 3 May, seat 14C"}
    written, found = asyncio.run(_as(url, alice, [("remember", {"memories": [memory]}),
                                                  ("search_memory", {"query": "flight to Rome"})]))
    assert written.structured_content == {"written": 1}
    assert found.structured_content["status"] == "ok" and found.structured_content["results"][0]["id"] == "rome"
    (bobs,) = asyncio.run(_as(url, bob, [("search_memory", {"query": "flight to Rome"})]))
    assert bobs.structured_content["results"] == []  # bob's namespace has nothing
    (named,) = asyncio.run(_as(url, bob, [("search_memory", {"query": "Rome", "namespace": "alice"})]))
    assert named.is_error and "namespace" in named.content[0].text
    assert redis_client.hlen("ferret:ns:{alice}:memories") == 1 and not redis_client.exists("ferret:ns:{bob}:memories")
    assert httpx.post(url, json={}).status_code == 401
    refused = httpx.post(url, json={}, headers=bearer(both))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "mcp_needs_one_namespace"


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_https_with_a_certificate(env, serve, redis_client, tmp_path):  # noqa: F811
    cert, key_file = _certificate(tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))
    served = serve("--tls-cert", str(cert), "--tls-key", str(key_file), scheme="https", verify=trusted)
    key = make_key(env, "-n", "alice")
    answered = httpx.get(f"{served.url}/v1/namespaces/alice/conversations/c/context", headers=bearer(key),
                         verify=trusted)
    assert answered.status_code == 200 and answered.json()["ready"] is False
    with pytest.raises(httpx.TransportError):  # plain HTTP on the TLS port is not served
        httpx.get(served.url.replace("https", "http") + "/healthz", timeout=5)


def test_plain_http_beyond_loopback_is_refused_unless_behind_a_tls_proxy(env):
    refused = subprocess.run([sys.executable, "-m", "ferret.cli.main", "serve", "--host", "0.0.0.0"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--host: 0.0.0.0 is not a loopback address" in refused.stderr
    half = subprocess.run([sys.executable, "-m", "ferret.cli.main", "serve", "--tls-cert", __file__], env=env,
                          capture_output=True, text=True, timeout=60)
    assert half.returncode == 2 and "--tls-cert/--tls-key" in half.stderr
