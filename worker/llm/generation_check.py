"""Whether the local model really generates, checked before anyone relies on it.

A llama.cpp build can load a model, start its server and answer
``GET /v1/models``, then die on its first completion: a build made with the
build machine's native instruction set (llama-cpp-python's default) uses
instructions that another CPU, or a sandbox that hides some of them, cannot
run, and the kernel kills the process with SIGILL. So ``ferret llm prepare``
generates one token in a child process, and ``ferret llm serve`` asks its own
server for a one-token chat completion before it reports itself ready; either
fails with a message naming the likely cause and the portable rebuild.

``PORTABLE_CMAKE_ARGS`` is that rebuild's target: native detection off and
AVX2/FMA/F16C on (x86-64-v3: every machine CI and the developers run on),
AVX-512 and AMX off. ``.ci/run`` builds with the same string (a unit test
holds the two together) into a wheel directory named after the target.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ferret.errors import ConfigError

PORTABLE_TARGET = "x86-64-v3"
PORTABLE_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
                       "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "
                       "-DLLAVA_BUILD=OFF")
LLAMA_CPP_VERSION = "0.3.36"
REBUILD_HINT = (f'rebuild llama-cpp-python for a portable CPU target: CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" '
                "pip install --no-cache-dir --force-reinstall --no-deps "
                f"'llama-cpp-python[server]=={LLAMA_CPP_VERSION}'")
PROBE_SECONDS = 300  # loading 1.1 GB and one token: seconds; a cold disk and a busy machine: more


@dataclass(frozen=True)
class Generated:
    """One completion that came back: what it said and how long it took."""

    text: str
    seconds: float


def cause_of_exit(returncode: int) -> str:
    """What a dead llama.cpp process's exit status most likely means, for the user."""
    if returncode == -signal.SIGILL:
        return ("it was killed by SIGILL (illegal instruction): the llama.cpp build uses an instruction this CPU "
                "cannot run (a build for another machine's native instruction set); " + REBUILD_HINT)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"it was killed by signal {-returncode} ({name}); if the build is not portable, " + REBUILD_HINT
    return f"it exited with status {returncode}"


def probe_command(model: Path) -> list[str]:
    """A child Python that loads ``model`` with llama.cpp and generates one token."""
    return [sys.executable, "-m", __name__, str(model)]


def check_in_child(model: Path, timeout: float = PROBE_SECONDS) -> Generated:
    """Generate one token from ``model`` in a child process; ConfigError, naming the cause, if it cannot."""
    started = time.monotonic()
    try:
        done = subprocess.run(probe_command(model), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"the model did not generate one token within {timeout:g} s") from None
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise ConfigError(f"the model cannot generate: {cause_of_exit(done.returncode)}"
                          + (f" ({' / '.join(tail)})" if tail and done.returncode > 0 else ""))
    return Generated(done.stdout.strip(), time.monotonic() - started)


def ask_one_token(base_url: str, model_alias: str, timeout: float) -> Generated:
    """A one-token chat completion from a running OpenAI-compatible server; ConfigError if none comes back."""
    body = {"model": model_alias, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
            "temperature": 0.0}
    started = time.monotonic()
    try:
        response = httpx.post(f"{base_url.rstrip('/')}/chat/completions", json=body, timeout=timeout)
        response.raise_for_status()
        choices = response.json()["choices"]
        text = choices[0]["message"]["content"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(f"the model server did not answer a one-token completion: {type(exc).__name__}: "
                          f"{str(exc)[:200]}") from None
    if not isinstance(text, str):
        raise ConfigError("the model server's completion has no text")
    return Generated(text, time.monotonic() - started)


def wait_until_generating(server: subprocess.Popen, base_url: str, model_alias: str, startup_seconds: float,
                          sleep: Callable[[float], None] = time.sleep) -> Generated:
    """Wait for the server to list its models, then for one generated token; ConfigError (the server
    stopped) naming the likely cause when it dies or never answers."""
    deadline = time.monotonic() + startup_seconds
    while True:
        if server.poll() is not None:
            raise ConfigError(f"the model server stopped while starting: {cause_of_exit(server.returncode)}")
        try:
            if httpx.get(f"{base_url.rstrip('/')}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise ConfigError(f"the model server did not start within {startup_seconds:g} s")
        sleep(0.25)
    try:
        return ask_one_token(base_url, model_alias, max(deadline - time.monotonic(), 30.0))
    except ConfigError as exc:
        try:
            server.wait(timeout=2)  # a crash takes a moment to be reaped
        except subprocess.TimeoutExpired:
            raise exc from None
        raise ConfigError(f"the model server died on its first completion: {cause_of_exit(server.returncode)}"
                          ) from None


def _probe(model: str) -> int:
    """Run in the child: load the model, generate one token, print it."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model, n_ctx=256, n_threads=2, verbose=False)
    out: Any = llm.create_completion("OK", max_tokens=1, temperature=0.0)  # not streamed: one response
    print(out["choices"][0]["text"])
    return 0


if __name__ == "__main__":
    sys.exit(_probe(sys.argv[1]))
