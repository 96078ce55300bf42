"""Clients of language-model endpoints (OpenAI-compatible chat completions)."""
