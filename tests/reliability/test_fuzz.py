"""Bad input at the edges: the producer API, the worker's payload parsing, the CLI.

Every case gets a clear error or is handled; none crashes a worker; none
writes outside its own keys."""

from __future__ import annotations

import re
import string
import time

import fakeredis
import pytest
from click.testing import CliRunner
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from ferret import keys
from ferret.cli.main import cli
from ferret.contract import FINAL_STATUSES, RetrievalRequest, parse_request
from ferret.errors import InvalidRequest, JobRefused
from ferret.job_ids import job_id_for
from ferret.producer.client import Producer
from ferret.settings import LimitSettings, load_settings
from ferret.worker.core.resources import build_resources
from ferret.worker.core.results import REFUSAL_LOG
from ferret.worker.core.run import run_job

LIMITS = LimitSettings()
FUZZ_JOB = job_id_for("any", None)  # the random-id form: a valid payload without a request id runs
nasty_text = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x1F)),
    st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.sampled_from(["", " ", "\x00", "*", "ferret:result:*", "../../etc", "a:b", "{}", "\ud800", "x" * 20_000]),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | nasty_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(nasty_text, children, max_size=4),
    max_leaves=12,
)
requests = st.fixed_dictionaries(
    {},
    optional={
        "query": json_values | nasty_text, "namespace": json_values | nasty_text,
        "request_id": json_values | nasty_text, "queue": json_values | st.sampled_from(["prefetch", "batch"]),
        "deadline_seconds": json_values | st.floats(allow_nan=True, allow_infinity=True),
        "filters": json_values, "options": json_values,
    },
)


@given(requests)
def test_parse_request_gives_a_request_or_a_named_error(data):
    try:
        request = parse_request(data, LIMITS)
    except InvalidRequest as exc:
        assert exc.field and exc.message
        return
    assert request.query.strip() and "\x00" not in request.query


@given(st.one_of(json_values, nasty_text, st.binary()))
def test_parse_request_on_anything(data):
    try:
        request = parse_request(data, LIMITS)  # anything else than these two outcomes fails the test
    except InvalidRequest as exc:
        assert exc.field
    else:
        assert isinstance(request, RetrievalRequest)


@pytest.fixture(scope="module")
def fake_context():
    client = fakeredis.FakeRedis()
    return client, build_resources(load_settings(environ={}), client)


payloads = st.one_of(
    json_values,
    st.fixed_dictionaries({"request": requests | json_values,
                           "enqueued_at": st.floats(allow_nan=True) | json_values,
                           "deadline_at": st.floats(allow_nan=True) | json_values},
                          optional={"trace_id": json_values, "memory_version": json_values}),
    st.builds(lambda r: {"request": r, "enqueued_at": time.time(), "deadline_at": time.time() + 5}, requests),
)


@settings(max_examples=300, phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])
@given(payloads)
@example({"request": {"query": "BTC thesis"}, "enqueued_at": time.time(), "deadline_at": time.time() + 3600})
@example({"request": {"query": "BTC \udc80"}, "enqueued_at": time.time(), "deadline_at": time.time() + 3600})
def test_worker_always_ends_in_one_final_status_and_writes_only_its_keys(fake_context, payload):
    """A valid request of its id's namespace ends in one final status; any other payload is
    refused, with no result written under the id (only the refusal log, and the refusal record a producer
    reads when the payload carries a trace id of the producer's making)."""
    client, ctx = fake_context
    client.flushall()
    try:
        result = run_job(ctx, payload, FUZZ_JOB, origin="prefetch").result
    except JobRefused as refused:
        assert refused.reason in ("malformed_job", "tenant_mismatch")
        written = set(client.keys("*"))
        assert REFUSAL_LOG.encode() in written and written <= {REFUSAL_LOG.encode(), keys.refusal(FUZZ_JOB).encode()}
        return
    assert result.status in FINAL_STATUSES
    stored = ctx.results.read(FUZZ_JOB)
    assert stored is not None and stored.status == result.status
    allowed = {f"ferret:result:{FUZZ_JOB}".encode(), f"ferret:done:{FUZZ_JOB}".encode()}
    cached = re.escape(f"ferret:ns:{result.namespace}:cache:".encode()) + rb"[0-9a-f]{40}"
    for key in client.keys("*"):
        assert (key in allowed or re.fullmatch(rb"ferret:trace:[0-9a-f]{32}", key)
                or (result.status == "ok" and (re.fullmatch(cached, key) or key == b"ferret:cache-index"))), key
        # (only an ok result is cached)
        assert client.ttl(key) > 0, f"{key!r} has no TTL"


@settings(max_examples=200)
@given(namespace=st.text(alphabet=string.printable, max_size=80), request_id=st.text(alphabet=string.printable,
                                                                                     max_size=200))
def test_namespaces_and_request_ids_cannot_reach_other_keys(namespace, request_id):
    client = fakeredis.FakeRedis()
    producer = Producer(client, load_settings(environ={}))
    try:
        handle = producer.enqueue({"query": "BTC", "namespace": namespace, "request_id": request_id})
    except InvalidRequest as exc:
        assert exc.field in {"namespace", "request_id"}
        return
    fixed = {"rq:queues", *(f"rq:queue:{queue}" for queue in ("prefetch", "batch"))}  # RQ's, named by nothing given
    for key in client.keys("*"):
        text = key.decode()
        assert text.startswith(("rq:", f"ferret:ns:{handle.namespace}:request:")), text
        assert text in fixed or request_id not in text.split(":")[-1] or len(request_id) < 3


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_cli_run_never_shows_a_traceback(tmp_path_factory, query):
    home = tmp_path_factory.getbasetemp() / "cli-fuzz"
    runner = CliRunner()
    result = runner.invoke(cli, ["run", query, "--json"], env={"FERRET_REDIS__EMBEDDED_DIR": str(home)})
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.output.startswith("error: ")
