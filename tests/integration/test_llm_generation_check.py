"""``ferret llm`` checks that the model generates before it is relied on: a llama.cpp process killed by SIGILL
(a build for another CPU) is reported as such, with the portable rebuild, instead of a server that dies later."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ferret.errors import ConfigError
from ferret.worker.llm import generation_check
from ferret.worker.llm.generation_check import PORTABLE_CMAKE_ARGS, check_in_child, wait_until_generating
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.integration

CRASHING_SERVER = ROOT / "tests" / "fakes" / "crashing_llama_server.py"


def test_a_server_that_dies_on_its_first_completion_is_named_for_its_instruction_set():
    port = free_port()
    server = subprocess.Popen([sys.executable, str(CRASHING_SERVER), str(port)])
    try:
        with pytest.raises(ConfigError) as caught:
            wait_until_generating(server, f"http://127.0.0.1:{port}/v1", "m", startup_seconds=60)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    said = str(caught.value)
    assert "died on its first completion" in said and "illegal instruction" in said
    assert PORTABLE_CMAKE_ARGS in said


def test_a_server_that_dies_while_starting_says_so():
    server = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(ConfigError, match="stopped while starting: it exited with status 3"):
        wait_until_generating(server, f"http://127.0.0.1:{free_port()}/v1", "m", startup_seconds=60)


def test_the_one_token_probe_names_sigill(monkeypatch, tmp_path):
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGILL)"
    monkeypatch.setattr(generation_check, "probe_command", lambda model: [sys.executable, "-c", suicide])
    with pytest.raises(ConfigError, match="illegal instruction"):
        check_in_child(Path(tmp_path / "m.gguf"))


def test_ci_builds_llama_cpp_for_the_portable_target_into_a_directory_named_after_it():
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in ci
    assert f"PORTABLE_TARGET={generation_check.PORTABLE_TARGET}" in ci
    assert f"LLAMA_CPP_VERSION={generation_check.LLAMA_CPP_VERSION}" in ci
