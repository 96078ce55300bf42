"""The HTTP API's OpenAPI document is as strict as the server: Schemathesis (every check) against a real
``ferret serve``, a real worker and a real redis-server finds no request the document allows that the server
refuses for its shape, none it forbids that the server takes, no answer outside the document and no server
error. Bounded: a few dozen cases an operation.

Two things are set for the run: the namespace in the path is the key's (any other is a 403 by design), and a
query's 504 (its wait ran out: ``not_yet``, documented) is not taken for a server error. Its coverage phase is
left out: on this Python its generator fails inside Hypothesis (``AST constructor recursion depth mismatch``)
before any request is sent."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from ferret.serve.app import openapi_document
from ferret.settings import load_settings
from tests.conftest import ROOT, SAMPLE
from tests.integration.http_support import make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

CONFIG = """
[parameters]
"path.namespace" = "sample"

[[operations]]
include-path = "/v1/namespaces/{namespace}/query"

[operations.checks.not_a_server_error]
enabled = false
"""


def test_schemathesis_finds_the_server_as_strict_as_its_document(env, start_workers, serve, tmp_path):  # noqa: F811
    st = shutil.which("st") or shutil.which("schemathesis")
    assert st is not None, "schemathesis is a test dependency (pip install -e '.[test]')"
    fast = {**env, "FERRET_HTTP__RATE_LIMIT": "100000/second"}
    assert subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(SAMPLE), "-n", "sample"], env=env,
                          capture_output=True, timeout=120).returncode == 0
    start_workers(1)
    served = serve(extra_env={"FERRET_HTTP__RATE_LIMIT": "100000/second"})
    key = make_key(fast, "-n", "sample")
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    ran = subprocess.run([st, "--config-file", str(config), "run", f"{served.url}/openapi.json",
                          "-H", f"Authorization: Bearer {key}", "--max-examples", "25", "--workers", "2",
                          "--request-timeout", "30", "--phases", "examples,fuzzing,stateful", "--seed", "1"],
                         env={**env, "PYTHONPATH": str(ROOT),
                              "SCHEMATHESIS_HOOKS": "tests.integration.schemathesis_hooks"},
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout.split("SUMMARY")[-1], ran.stdout[-3000:]


def test_the_document_states_the_limits_in_force():
    limits = load_settings(environ={"FERRET_LIMITS__MAX_QUERY_CHARS": "300",
                                    "FERRET_LIMITS__MAX_NAMESPACE_CHARS": "20"}).limits
    document = openapi_document(limits)
    schemas = document["components"]["schemas"]
    query = schemas["QueryBody"]["properties"]["query"]
    assert query["maxLength"] == 300 and query["minLength"] == 1 and {"pattern": r"\S"} in query["allOf"]
    (namespace,) = [p for p in document["paths"]["/v1/namespaces/{namespace}/query"]["post"]["parameters"]
                    if p["name"] == "namespace"]
    assert namespace["schema"]["maxLength"] == 20
    assert len(schemas["Memory"]["anyOf"]) == 3  # title, body or summary
    result = schemas["RetrievalResult"]
    assert set(result["required"]) == set(result["properties"])  # every answer field is always there
    assert schemas["ErrorDetail"]["required"] == ["code", "message"]
