"""The LLM stages: the agent loop and the re-rank, each against an OpenAI-compatible chat endpoint."""

from __future__ import annotations

from pydantic import Field, SecretStr

from ferret.settings.strict import Strict


class AgentSettings(Strict):
    """Seed 002's ReAct agent loop over an OpenAI-compatible chat endpoint
    (Ollama, vLLM, llama.cpp's server, OpenAI). Off by default. When on, a
    query that routes COMPLEX or AMBIGUOUS runs it (``on_complex_route``),
    and so does any request with ``options.agent``."""

    enabled: bool = False
    on_complex_route: bool = True
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "qwen3:4b"
    api_key: SecretStr | None = None  # never logged
    max_steps: int = Field(7, ge=1, le=20)
    temperature: float = Field(0.3, ge=0, le=2)
    timeout_seconds: float = Field(20.0, gt=0, le=600)  # one chat call, at most (and never past the deadline)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    max_tokens: int = Field(1024, ge=16, le=32_768)
    result_reserve_seconds: float = Field(0.15, ge=0, le=10)  # left for formatting and the result write
    preview_chars: int = Field(300, ge=20, le=4000)


class RerankSettings(Strict):
    """Opt-in LLM re-ranking of the top candidates (seed 004) over an
    OpenAI-compatible chat completions endpoint (Ollama, vLLM, llama.cpp, ...).

    Off by default. When on, COMPLEX routes are re-ranked unasked (if
    ``on_complex_route``) and any request with ``options.rerank`` is.
    """

    enabled: bool = False
    on_complex_route: bool = True
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "qwen3:0.6b"
    api_key: SecretStr | None = None
    top_k: int = Field(20, ge=1, le=100)
    weight: float = Field(0.5, ge=0, le=1)  # share of the LLM's 0-10 score (scaled to 0-1) in the blend
    timeout_seconds: float = Field(5.0, gt=0, le=600)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    min_seconds_left: float = Field(0.2, ge=0, le=60)  # do not start a call with less time left
    max_tokens: int = Field(1024, ge=16, le=32_768)
    preview_chars: int = Field(300, ge=20, le=4000)
