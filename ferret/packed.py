"""The stored form of the larger values Ferret writes to Redis (results,
traces, cache entries): zlib-compressed behind a mark.

A prefetch job's result and trace are JSON of about 5 KB each, and Redis
keeps every one for its TTL; compressed they are a third of that. The mark
(``\\x1fFZ1``: no JSON text starts with a control character) tells a packed
value from one stored as plain JSON, which is still read as it is (values
written before packing, or by a writer that does not pack). Reading inflates
under a cap (``ferret.inflate``): what Redis holds is untrusted, and a
packed value is a zlib stream like any bomb.
"""

from __future__ import annotations

import zlib

from ferret.inflate import InflatesTooLarge, inflate_capped

MARK = b"\x1fFZ1"
# What a reader takes of a stored value, packed or inflated: far above any result
# (limits.max_result_bytes: 2 MB), trace or cache entry.
MAX_VALUE_BYTES = 16 * 1024 * 1024
LEVEL = 1  # zlib's fastest: ~30 us for a 5 KB result, ~3x smaller (level 6 gains ~8% more for ~30% more time)


class UnpackFailed(ValueError):
    """A value carries the mark but is not a whole zlib stream, or inflates past the cap."""


def pack(body: bytes) -> bytes:
    return MARK + zlib.compress(body, LEVEL)


def unpack(stored: bytes | str, cap: int) -> bytes:
    """The value as written: inflated when packed (at most ``cap`` bytes), else as it is."""
    raw = stored if isinstance(stored, bytes) else stored.encode()
    if not raw.startswith(MARK):
        return raw
    try:
        body = inflate_capped(raw[len(MARK):], cap)
    except InflatesTooLarge as exc:
        raise UnpackFailed(f"packed value {exc}") from None
    if body is None:
        raise UnpackFailed("packed value is not a whole zlib stream")
    return body
