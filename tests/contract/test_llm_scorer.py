"""The LLM scorer against a local server speaking the chat completions format."""

import time

import pytest
from pydantic import SecretStr

from ferret.errors import RerankFailed
from ferret.records import Hit, Memory
from ferret.settings import RerankSettings
from ferret.worker.fakes.chat_server import FakeChat
from ferret.worker.llm.reranker import LLMScorer
from tests.timing import scaled


@pytest.fixture(scope="module")
def chat_server():
    server = FakeChat(favourite={"ferries"})
    yield server
    server.close()


@pytest.fixture
def chat(chat_server):
    chat_server.mode, chat_server.delay = "ok", 0.0
    chat_server.requests.clear()
    chat_server.auth_headers.clear()
    return chat_server


def _scorer(chat, **overrides):
    return LLMScorer(RerankSettings(enabled=True, base_url=chat.base_url, **overrides))


def _hits(count=3):
    bodies = ["markets were calm", "the ferries stop during the eruption", "volcano ash over the island"]
    return [Hit.of(Memory(id=f"m{i}", content_title=f"note {i}", content_body=bodies[i % 3]), 0.5)
            for i in range(count)]


@pytest.mark.parametrize("mode", ["ok", "think", "prose", "positional"])
def test_scores_come_back_by_position(chat, mode):
    chat.mode = mode
    scores = _scorer(chat).score("when do ferries run?", _hits(), timeout=5)
    assert scores == {0: 1.0, 1: 10.0, 2: 1.0}


def test_request_carries_model_key_and_the_snippets(chat):
    scorer = _scorer(chat, model="tiny-model", api_key=SecretStr("s3cret"), max_tokens=256)
    scorer.score("when do ferries run?", _hits(), timeout=5)
    body = chat.requests[0]
    assert body["model"] == "tiny-model" and body["max_tokens"] == 256 and body["temperature"] == 0
    assert "[2] note 1 : the ferries stop" not in body["messages"][1]["content"]
    assert "[2] note 1: the ferries stop during the eruption" in body["messages"][1]["content"]
    assert chat.auth_headers == ["Bearer s3cret"]
    assert "s3cret" not in repr(scorer.settings)


@pytest.mark.parametrize("mode, reason", [
    ("malformed", "malformed"), ("unclosed_think", "malformed"), ("wrong_shape", "malformed"),
    ("error500", "error"), ("error401", "error"),
])
def test_bad_answers_raise_with_the_reason(chat, mode, reason):
    chat.mode = mode
    with pytest.raises(RerankFailed) as caught:
        _scorer(chat).score("when do ferries run?", _hits(), timeout=5)
    assert caught.value.reason == reason


@pytest.mark.parametrize("mode", ["slow", "trickle"])
def test_a_slow_endpoint_is_cut_off_at_the_time_given(chat, mode):
    chat.mode, chat.delay = mode, 0.3 if mode == "trickle" else 3.0
    started = time.monotonic()
    with pytest.raises(RerankFailed) as caught:
        _scorer(chat).score("when do ferries run?", _hits(), timeout=0.5)
    took = time.monotonic() - started
    assert caught.value.reason == "timeout"
    assert took < scaled(1.0), f"took {took:.2f}s for a 0.5s bound"


def test_unreachable_endpoint_is_an_error():
    scorer = LLMScorer(RerankSettings(enabled=True, base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(RerankFailed) as caught:
        scorer.score("q", _hits(), timeout=2)
    assert caught.value.reason == "error"
