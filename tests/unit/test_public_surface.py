"""The public Python surface is a line a test pins: ``ferret.__all__`` and the clients' methods, each named
and documented on the generated API reference page; importing ``ferret`` loads none of them until used."""

from __future__ import annotations

import inspect
import subprocess
import sys

import ferret

PUBLIC = ["connect", "connect_async", "Client", "AsyncClient", "Memory", "Filters", "TimeRange", "JobHandle",
          "ConversationContext", "RetrievalResult", "ResultItem", "Timestamps", "FerretError", "InvalidRequest",
          "InvalidMemory", "RequestIdTaken", "RedisUnreachable", "ResultTimeout", "JobNotFound", "ForeignResult",
          "__version__"]
METHODS = ("enqueue", "query", "wait", "prefetch", "context_for", "result", "status", "trace", "remember", "forget",
           "close")


def test_the_public_names_are_pinned_and_resolve():
    assert sorted(ferret.__all__) == sorted(PUBLIC)
    assert ferret.CLIENT_METHODS == METHODS
    for name in PUBLIC:
        assert getattr(ferret, name) is not None, name


def test_both_clients_offer_every_method_documented_and_the_async_ones_are_coroutines():
    for cls, is_async in ((ferret.Client, False), (ferret.AsyncClient, True)):
        for name in METHODS:
            member = getattr(cls, name)
            assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"
            assert inspect.iscoroutinefunction(member) == is_async, f"{cls.__name__}.{name}"


def test_the_api_reference_page_documents_every_public_name_and_method():
    from docs import reference_pages

    page = reference_pages.python_api_page()
    for name in PUBLIC[:-1]:
        assert f"## `ferret.{name}`" in page, name
    for name in METHODS:
        assert page.count(f"### `{name}`") == 2, name  # once a client
    assert "| `content_body` |" in page and "| `job_id` |" in page  # a memory's and a result's fields


def test_importing_ferret_loads_no_client_until_a_name_is_used():
    code = ("import sys, ferret; before = 'ferret.producer.api' in sys.modules; ferret.Client; "
            "print(before, 'ferret.producer.api' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.stdout.split() == ["False", "True"], ran.stdout + ran.stderr
