"""One JSON call to an HTTP service a backend talks to (a Nous server, an
embeddings endpoint), with its failures as ``BackendError``: could not reach
it, timed out or 5xx -> ``BackendUnavailable``; 4xx or an answer that is not
JSON -> ``BackendProtocolError``; skipped while its circuit is open
(``ferret.breaker``) -> ``BackendUnavailable``. Messages name the path and, for an error
answer, what the server said (its ``{"error": ...}`` or the start of its text)."""

from __future__ import annotations

from typing import Any

import httpx

from ferret.breaker import CircuitOpen
from ferret.errors import BackendProtocolError, BackendUnavailable


def error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(payload, dict) and "error" in payload:
        return str(payload["error"])[:200]
    return str(payload)[:200]


def call_json(client: httpx.Client, backend: str, method: str, path: str, budget: float,
              connect_timeout: float, **request: Any) -> Any:
    """``method path`` within ``budget`` seconds (connecting within ``connect_timeout`` of them); its JSON."""
    if budget <= 0:
        raise BackendUnavailable(backend, f"no time left for {path}")
    try:
        response = client.request(method, path, **request,
                                  timeout=httpx.Timeout(budget, connect=min(budget, connect_timeout)))
    except CircuitOpen as exc:
        raise BackendUnavailable(backend, f"{path} not called: {exc}") from None
    except httpx.TimeoutException as exc:
        raise BackendUnavailable(backend, f"{path} timed out after {budget:.2f}s") from exc
    except httpx.HTTPError as exc:
        raise BackendUnavailable(backend, f"{path} failed: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 500:
        raise BackendUnavailable(backend, f"{path} answered {response.status_code}: {error_text(response)}")
    if response.status_code >= 400:
        raise BackendProtocolError(backend, f"{path} answered {response.status_code}: {error_text(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise BackendProtocolError(backend, f"{path} answered invalid JSON") from exc
