"""The HTTP server's own Prometheus metrics, in a registry of its own (served at ``/metrics``).

Labels are the route's template (``/v1/namespaces/{namespace}/query``), never the path a client sent:
a namespace, a job id or a key that strayed into a URL never becomes a label."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REFUSAL_REASONS = ("no_key", "bad_key", "revoked_key", "too_many_failures", "other_namespace", "read_only",
                   "rate_limited", "too_large", "body_too_slow", "head_too_slow", "key_in_url",
                   "mcp_needs_one_namespace", "unavailable")


class HttpMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ferret_http_requests_total", "HTTP requests answered, by route template, method "
                                "and status code", ["route", "method", "status"], registry=self.registry)
        self.seconds = Histogram("ferret_http_request_seconds", "Time to answer an HTTP request, by route template",
                                 ["route"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                          30, 60, 300))
        self.refusals = Counter("ferret_http_refusals_total", "HTTP requests refused before they reached Ferret, "
                                "by reason (no_key, bad_key, revoked_key, too_many_failures: wrong keys past their "
                                "rate, other_namespace, read_only: at a route or an MCP tool, rate_limited, "
                                "too_large, body_too_slow, head_too_slow: a connection closed for sending no request "
                                "head in time, key_in_url, mcp_needs_one_namespace, unavailable: Redis did not "
                                "answer the key or rate check)", ["reason"],
                                registry=self.registry)
        self.waiting = Gauge("ferret_http_waits_in_flight", "HTTP requests waiting for a job's result now",
                             registry=self.registry)
        for reason in REFUSAL_REASONS:
            self.refusals.labels(reason)
