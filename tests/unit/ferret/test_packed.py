from __future__ import annotations

import zlib

import pytest

from ferret.packed import MARK, UnpackFailed, pack, unpack
from ferret.worker.core.results import trace_sampled


def test_a_packed_value_reads_back_and_is_smaller():
    body = b'{"results": [' + b'{"id": "m01", "preview": "funding squeeze"},' * 40 + b"]}"
    packed = pack(body)
    assert packed.startswith(MARK) and len(packed) < len(body) / 3
    assert unpack(packed, 1 << 20) == body


def test_a_plain_value_is_read_as_it_is():
    assert unpack(b'{"job_id": "x"}', 10) == b'{"job_id": "x"}'


@pytest.mark.parametrize("raw, words", [(MARK + b"not zlib", "not a whole zlib stream"),
                                        (MARK + zlib.compress(b"x" * 100)[:-6], "not a whole zlib stream"),
                                        (MARK + zlib.compress(b"0" * (8 << 20), 9), "inflates past 4,096 bytes")])
def test_a_bad_or_bombing_packed_value_fails_within_the_cap(raw, words):
    with pytest.raises(UnpackFailed, match=words):
        unpack(raw, 4096)


def test_trace_sampling_is_by_id_and_keeps_about_the_share_asked():
    ids = [f"{n:032x}" for n in range(4000)]
    kept = [trace_id for trace_id in ids if trace_sampled(trace_id, 0.25)]
    assert 800 < len(kept) < 1200
    assert kept == [trace_id for trace_id in ids if trace_sampled(trace_id, 0.25)]  # every worker agrees
    assert all(trace_sampled(trace_id, 1.0) for trace_id in ids[:50])
    assert not any(trace_sampled(trace_id, 0.0) for trace_id in ids[:50])


def test_a_packed_value_is_a_plain_zlib_stream_deflated_by_isa_l():
    """Any zlib reader inflates it (an older Ferret's too): ISA-L only deflates faster."""
    import ferret.packed

    body = b'{"context": "' + b"Caroline: I went to the LGBTQ support group yesterday. " * 200 + b'"}'
    assert ferret.packed.deflater.__name__ == "isal.isal_zlib"
    assert zlib.decompress(pack(body)[len(MARK):]) == body


def test_isa_l_inflates_what_the_standard_zlib_deflates_and_refuses_what_it_refuses():
    """The reader inflates by ISA-L: a stream from any zlib reads back, a broken or bombing one fails as before."""
    import ferret.inflate
    from ferret.inflate import InflatesTooLarge, inflate_capped

    assert ferret.inflate.inflater_module.__name__ == "isal.isal_zlib"
    body = b"Melanie: I ran a charity race for mental health last Saturday. " * 300
    for level in (1, 6, 9):
        assert inflate_capped(zlib.compress(body, level), len(body)) == body
    assert inflate_capped(b"\x78\x9c" + b"\xff" * 40, 1 << 20) is None  # a zlib header, then garbage
    assert inflate_capped(zlib.compress(body)[:-4], 1 << 20) is None  # no checksum: not one whole stream
    with pytest.raises(InflatesTooLarge):
        inflate_capped(zlib.compress(body), len(body) - 1)
