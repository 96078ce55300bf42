"""RQ's stamp parser and serializer look-up, made cheap: the same answers as RQ's own."""

from __future__ import annotations

import datetime
import sys

import pytest
import rq.job
import rq.utils
from hypothesis import given, settings
from hypothesis import strategies as st
from rq.serializers import JSONSerializer, PickleSerializer

from ferret.rq_layer import cheap_helpers
from ferret.rq_layer.cheap_helpers import resolve_serializer, utcparse


def _rq(string):
    try:
        return cheap_helpers._RQ_UTCPARSE(string)
    except ValueError:
        return ValueError


def _ours(string):
    try:
        return utcparse(string)
    except ValueError:
        return ValueError


@settings(max_examples=400, deadline=None)
@given(st.datetimes(min_value=datetime.datetime(1000, 1, 1), max_value=datetime.datetime(9999, 12, 31)))
def test_a_stamp_in_rqs_format_reads_as_rq_reads_it(moment):
    stamp = rq.utils.utcformat(moment.replace(tzinfo=datetime.UTC))
    assert utcparse(stamp) == cheap_helpers._RQ_UTCPARSE(stamp) == moment.replace(tzinfo=datetime.UTC)


@settings(max_examples=400, deadline=None)
@given(st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,7})?Z?\Z")
       | st.text(alphabet="0123456789-T:.Z ٣", max_size=30))
def test_any_other_string_gets_rqs_answer_or_rqs_error(string):
    """Out-of-range fields, other digit counts, other scripts' digits, garbage: RQ's value or a ValueError."""
    assert _ours(string) == _rq(string)


def test_the_serializer_is_resolved_as_rq_does_and_a_bad_one_still_refused():
    for asked in (JSONSerializer, None, "rq.serializers.JSONSerializer", "json"):
        assert resolve_serializer(asked) is cheap_helpers._RQ_RESOLVE(asked)
        assert resolve_serializer(asked) is resolve_serializer(asked)
    assert resolve_serializer(None) is PickleSerializer
    for _ in range(2):  # a failure is not kept as an answer
        with pytest.raises(NotImplementedError):
            resolve_serializer(object())


def test_the_worker_swaps_them_into_rqs_modules(monkeypatch):
    for name, module in list(sys.modules.items()):  # every swap put back after the test
        for attribute in ("utcparse", "resolve_serializer"):
            if (name == "rq" or name.startswith("rq.")) and hasattr(module, attribute):
                monkeypatch.setattr(module, attribute, getattr(module, attribute))
    cheap_helpers.use_cheap_helpers()
    assert rq.utils.utcparse is utcparse and rq.job.resolve_serializer is resolve_serializer
    assert rq.utils.str_to_date(b"2026-11-27T07:47:26.485497Z") == \
        datetime.datetime(2026, 11, 27, 7, 47, 26, 485497, tzinfo=datetime.UTC)
