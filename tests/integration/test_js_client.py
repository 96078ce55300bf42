"""The JavaScript client (clients/js) run by node's own test runner against a real ``ferret serve`` and a real
worker: query, prefetch and context, remember, forget, and the errors (401, 403, 413, 429). Its types are
made from the server's OpenAPI document: the copy the client was typed from must be the one the server
serves."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import ROOT, require_tool
from tests.integration.http_support import make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration
CLIENT = ROOT / "clients" / "js"


def test_the_js_client_against_a_real_server(env, start_workers, serve, redis_client):  # noqa: F811
    node = require_tool("node", "Node.js 18 or newer (apt-get install nodejs)")
    start_workers(1)
    served = serve(extra_env={"FERRET_HTTP__MAX_BODY_BYTES": "65536"})
    keys = {"FERRET_KEY": make_key(env, "-n", "kitchen"),
            "FERRET_READ_ONLY_KEY": make_key(env, "-n", "kitchen", "--read-only"),
            "FERRET_LOW_RATE_KEY": make_key(env, "-n", "kitchen", "--rate", "2/minute")}
    ran = subprocess.run([node, "--test", "test/"], cwd=CLIENT, env={**env, "FERRET_URL": served.url, **keys},
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "# fail 0" in ran.stdout and "# pass 5" in ran.stdout


def test_the_client_is_typed_from_the_document_the_server_serves():
    from ferret.serve.app import openapi_document

    committed = json.loads((CLIENT / "openapi.json").read_text())
    assert committed == json.loads(json.dumps(openapi_document())), \
        "clients/js/openapi.json is stale: write openapi_document() there and run `npm run types` in clients/js"
    types = (CLIENT / "src" / "schema.d.ts").read_text()
    for name in committed["components"]["schemas"]:
        assert re.search(rf"^        {name}: ", types, re.MULTILINE), \
            f"src/schema.d.ts lacks {name}: run `npm run types` in clients/js"
