"""The stored form of the larger values Ferret writes to Redis (results,
traces, cache entries): zlib-compressed behind a mark.

A prefetch job's result and trace are JSON of about 5 KB each, and Redis
keeps every one for its TTL; compressed they are a third of that. The mark
(``\\x1fFZ1``: no JSON text starts with a control character) tells a packed
value from one stored as plain JSON, which is still read as it is (values
written before packing, or by a writer that does not pack). Reading inflates
under a cap (``ferret.inflate``): what Redis holds is untrusted, and a
packed value is a zlib stream like any bomb.

The stream is deflated by ISA-L (``isal``) when it is installed, as it is with Ferret: the same zlib
format, so any reader inflates it (an older Ferret's too), in ~62 us for a batch query's 29 KB result against
~224 us for the standard library's zlib at its fastest level (the project's 2-core machine), and a little
smaller (7.6 KB against 8.0 KB). Where no ISA-L wheel exists for the platform, the standard library
deflates.
"""

from __future__ import annotations

from ferret.inflate import InflatesTooLarge, inflate_capped

try:
    from isal import isal_zlib as deflater
except ImportError:  # no ISA-L wheel for this platform
    import zlib as deflater  # type: ignore[no-redef]
# ISA-L's levels run 0-3: its 1 is faster and smaller than zlib's 1 here; zlib's 1 is its fastest, ~3x smaller
# (zlib's 6 gains ~8% more for ~30% more time).
LEVEL = 1

MARK = b"\x1fFZ1"
# What a reader takes of a stored value, packed or inflated: far above any result
# (limits.max_result_bytes: 2 MB), trace or cache entry.
MAX_VALUE_BYTES = 16 * 1024 * 1024


class UnpackFailed(ValueError):
    """A value carries the mark but is not a whole zlib stream, or inflates past the cap."""


def pack(body: bytes) -> bytes:
    return MARK + deflater.compress(body, LEVEL)


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
