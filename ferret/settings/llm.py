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
    """The ReAct agent loop, for complex questions."""
    on_complex_route: bool = True
    """Run the agent for queries routed COMPLEX or AMBIGUOUS without being asked (when enabled)."""
    base_url: str = "http://127.0.0.1:11434/v1"
    """The OpenAI-compatible endpoint of the agent's model."""
    model: str = "qwen3:4b"
    """The agent model's name at that endpoint."""
    api_key: SecretStr | None = None  # never logged
    max_steps: int = Field(7, ge=1, le=20)
    """The most think-act steps one run takes."""
    temperature: float = Field(0.3, ge=0, le=2)
    """The agent model's sampling temperature."""
    timeout_seconds: float = Field(20.0, gt=0, le=600)  # one chat call, at most (and never past the deadline)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    """Connecting to the endpoint, at most."""
    max_tokens: int = Field(1024, ge=16, le=32_768)
    """The most tokens the model may write per call."""
    result_reserve_seconds: float = Field(0.15, ge=0, le=10)  # left for formatting and the result write
    preview_chars: int = Field(300, ge=20, le=4000)
    """Characters of each memory shown to the model."""


class RerankSettings(Strict):
    """Opt-in LLM re-ranking of the top candidates over an
    OpenAI-compatible chat completions endpoint (Ollama, vLLM, llama.cpp, ...).

    Off by default. When on, COMPLEX routes are re-ranked unasked (if
    ``on_complex_route``) and any request with ``options.rerank`` is.
    """

    enabled: bool = False
    """The opt-in LLM re-rank of the top candidates."""
    on_complex_route: bool = True
    """Re-rank queries routed COMPLEX without being asked (when enabled)."""
    base_url: str = "http://127.0.0.1:11434/v1"
    """The OpenAI-compatible endpoint of the re-rank model."""
    model: str = "qwen3:0.6b"
    """The re-rank model's name at that endpoint."""
    api_key: SecretStr | None = None
    """Sent as a bearer token to the endpoint; never logged."""
    top_k: int = Field(20, ge=1, le=100)
    """Candidates sent to the model."""
    weight: float = Field(0.5, ge=0, le=1)  # share of the LLM's 0-10 score (scaled to 0-1) in the blend
    timeout_seconds: float = Field(5.0, gt=0, le=600)
    """One re-rank call, at most (and never past the deadline)."""
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    """Connecting to the endpoint, at most."""
    min_seconds_left: float = Field(0.2, ge=0, le=60)  # do not start a call with less time left
    max_tokens: int = Field(1024, ge=16, le=32_768)
    """The most tokens the model may write for its ratings."""
    preview_chars: int = Field(300, ge=20, le=4000)
    """Characters of each candidate shown to the model."""
