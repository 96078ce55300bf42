from hypothesis import given
from hypothesis import strategies as st

from ferret.cache import _PER_RUN, cache_entry, cache_key, inflight_key, normalise, read_entry
from ferret.contract import ResultItem, parse_request
from ferret.settings import LimitSettings
from ferret.stats import JobStats
from tests.strategies import job_stats, result_items, texts

LIMITS = LimitSettings()


def _key(version=1, backend="local", **request):
    request.setdefault("query", "What is my BTC thesis?")
    return cache_key(parse_request(request, LIMITS), backend, version)


def test_normalise():
    assert normalise("  What is   my BTC Thesis?!  ") == "what is my btc thesis"
    assert normalise("a.b") == "a.b"


def test_equivalent_queries_share_a_key():
    assert _key(query="what is my btc thesis") == _key(query="  What is my BTC   thesis ?")


def test_everything_that_changes_the_answer_changes_the_key():
    base = _key()
    assert _key(version=2) != base
    assert _key(backend="nous") != base
    assert _key(namespace="other") != base
    assert _key(filters={"subtype": "custom:thesis"}) != base
    assert _key(options={"max_results": 3}) != base
    assert _key(query="What is my SOL thesis?") != base


def test_keys_live_in_the_namespace():
    key = _key(namespace="alice")
    assert key.startswith("ferret:ns:alice:cache:")
    assert inflight_key(key).startswith("ferret:ns:alice:inflight:")


def test_the_fingerprint_follows_what_decides_an_answer():
    from ferret.cache import answer_fingerprint
    from ferret.settings import load_settings

    base = answer_fingerprint(load_settings(environ={}))
    for name, value in (("PIPELINE__MAX_RESULTS", "2"), ("PIPELINE__RELEVANCE_RATIO", "0.5"),
                        ("BACKEND__KIND", "nous"), ("RERANK__MODEL", "other"),
                        ("CO_RETRIEVAL__AFFINITY_WEIGHT", "0.3"), ("LIMITS__MAX_RESULT_BYTES", "50000"),
                        ("SEMANTIC__ENABLED", "true"), ("PIPELINE__FUSION__SEMANTIC_SHARE", "0.5"),
                        ("PIPELINE__GOOD_SCORE", "0.2")):
        assert answer_fingerprint(load_settings(environ={f"FERRET_{name}": value})) != base, name
    for name, value in (("SERVICE__RESULT_TTL_SECONDS", "60"), ("BACKEND__NOUS__API_KEY", "secret"),
                        ("RERANK__API_KEY", "secret")):
        assert answer_fingerprint(load_settings(environ={f"FERRET_{name}": value})) == base, name
    assert _key() != cache_key(parse_request({"query": "What is my BTC thesis?"}, LIMITS), "local", 1, base)


def test_the_cache_is_held_to_its_cap_and_only_cache_entries_are_deleted():
    import fakeredis

    from ferret import keys
    from ferret.contract import RetrievalResult, Timestamps
    from ferret.results import ResultStore

    client = fakeredis.FakeRedis()
    store = ResultStore(client, cache_max_entries=3)
    client.set("ferret:ns:b.x:memories", "another tenant's data")
    client.zadd(keys.cache_index(), {"ferret:ns:b.x:memories": 0})  # planted by someone who writes to Redis
    entries = [keys.cached("a.b", f"{i:040x}") for i in range(5)]
    for i, entry in enumerate(entries):
        result = RetrievalResult(job_id=f"fr-{i:032x}", request_id=None, namespace="a.b", queue="prefetch",
                                 status="ok", timestamps=Timestamps(enqueued_at=0, deadline_at=1))
        store.write(result, None, (entry, b"{}", 60))
    assert [bool(client.exists(e)) for e in entries] == [False, False, True, True, True]
    assert client.zcard(keys.cache_index()) == 3
    assert client.get("ferret:ns:b.x:memories") == b"another tenant's data"


# ---- the stored form of an answer: what is written reads back as the same answer ----

finite = st.floats(allow_nan=False, allow_infinity=False)
items = result_items(finite)
answer_stats = job_stats(finite)


def _as_read(results, context, stats):
    """What the entry must read back as: the answer, its stats less what belongs to the run, a hit."""
    kept = stats.model_dump(mode="json", exclude_none=True, exclude=_PER_RUN)
    return results, context, JobStats.model_validate({**kept, "cache_hit": True, "stage_ms": {"cache": 0.5}})


@given(st.lists(items, max_size=4), texts, answer_stats)
def test_an_entry_reads_back_as_the_answer_it_stores(results, context, stats):
    assert read_entry(cache_entry(results, context, stats), 0.5) == _as_read(results, context, stats)


def test_an_entry_orjson_refuses_is_written_by_the_standard_library():
    item = ResultItem(id="m1", score=1.0, original_score=1.0, section="EPISODIC", subtype=None, sub_query=0,
                      sub_query_text=None, title="t", preview="half a pair: \ud800", date=None)
    stats = JobStats(route="SIMPLE", backend_calls=[("search", "ok", 0.001)])
    assert read_entry(cache_entry([item], "ctx \udfff", stats), 0.5) == _as_read([item], "ctx \udfff", stats)
