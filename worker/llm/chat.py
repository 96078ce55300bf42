"""A small client for an OpenAI-compatible ``POST {base_url}/chat/completions``.

Works with Ollama, vLLM, llama.cpp's server, OpenAI and the like. One
pooled httpx client per process; every call carries its own timeout. Every
failure is raised as ``failure`` (``RerankFailed`` for the re-rank,
``AgentFailed`` for the agent) with the reason the metrics count:
``timeout`` (connect or read timed out), ``error`` (unreachable, 4xx/5xx) or
``malformed`` (an answer not shaped like a chat completion) or
``circuit_open`` (the endpoint failed repeatedly: skipped, ``ferret.breaker``).
"""

from __future__ import annotations

from typing import Any

import httpx

from ferret.breaker import CircuitOpen
from ferret.errors import ChatFailed, RerankFailed
from ferret.settings import AgentSettings, RerankSettings


def _message_text(payload: Any, failure: type[ChatFailed]) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise failure("malformed", "answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise failure("malformed", f"message content is {type(content).__name__}, not text")
    return content


def chat_endpoint(settings: RerankSettings | AgentSettings) -> str:
    """The endpoint's name for its circuit breaker: the re-rank and the agent on one server share it."""
    return f"chat {settings.base_url.rstrip('/')}"


class ChatClient:
    def __init__(self, settings: RerankSettings | AgentSettings, transport: httpx.BaseTransport | None = None,
                 failure: type[ChatFailed] = RerankFailed, temperature: float = 0.0,
                 stop: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.failure = failure
        self.temperature = temperature
        self.stop = stop  # the answer ends before any of these (OpenAI's ``stop``, at most four)
        key = settings.api_key.get_secret_value() if settings.api_key else None
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers={"Authorization": f"Bearer {key}"} if key else {},
            transport=transport,
        )

    def complete(self, messages: list[dict[str, str]], timeout: float) -> str:
        """The assistant's reply text; raise ``failure``."""
        failure = self.failure
        if timeout <= 0:
            raise failure("timeout", "no time left for the chat call")
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.settings.max_tokens, "stream": False}
        if self.stop:
            body["stop"] = list(self.stop)
        limits = httpx.Timeout(timeout, connect=min(timeout, self.settings.connect_timeout_seconds))
        try:
            response = self._client.post("chat/completions", json=body, timeout=limits)
        except CircuitOpen as exc:
            raise failure("circuit_open", str(exc)) from None
        except httpx.TimeoutException as exc:
            raise failure("timeout", f"chat call timed out after {timeout:.2f}s") from exc
        except httpx.HTTPError as exc:
            raise failure("error", f"chat call failed: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise failure("error", f"chat endpoint answered {response.status_code}: {response.text[:200]}")
        try:
            payload = response.json()
        except ValueError:
            raise failure("malformed", "chat endpoint answered invalid JSON") from None
        return _message_text(payload, failure)

    def close(self) -> None:
        self._client.close()
