"""The LLM scorer behind the re-rank stage: prompt, chat call, parse.

The whole call is bounded by the time it is given, however the endpoint
behaves (a server trickling bytes defeats httpx's per-read timeouts): it runs
on the search pool and is abandoned at the bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferret.errors import RerankFailed
from ferret.records import Hit
from ferret.settings import RerankSettings
from ferret.worker.llm.chat import ChatClient
from ferret.worker.pipeline.parallel import TimedOut, call_with_timeout
from ferret.worker.pipeline.rerank import build_messages, parse_scores


class LLMScorer:
    def __init__(self, settings: RerankSettings, chat: ChatClient | None = None) -> None:
        self.settings = settings
        self.chat = chat or ChatClient(settings)

    def score(self, query: str, candidates: Sequence[Hit], timeout: float) -> dict[int, float]:
        messages = build_messages(query, candidates, self.settings.preview_chars)
        answer = call_with_timeout(lambda: self.chat.complete(messages, timeout), timeout)
        if isinstance(answer, TimedOut):
            raise RerankFailed("timeout", f"no answer within {timeout:.2f}s")
        return parse_scores(answer, len(candidates))

    def close(self) -> None:
        self.chat.close()
