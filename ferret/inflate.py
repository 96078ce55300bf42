"""zlib inflation under a cap: a small compressed value from Redis can be a
bomb, so it is inflated in steps and given up past the cap, having cost at
most the cap."""

from __future__ import annotations

import zlib

_STEP = 64 * 1024


class InflatesTooLarge(ValueError):
    """The data inflates past the cap."""


def inflate_capped(data: bytes, cap: int) -> bytes | None:
    """``data`` inflated, at most ``cap`` bytes of it (else ``InflatesTooLarge``);
    None when ``data`` is not one whole zlib stream."""
    inflater = zlib.decompressobj()
    out = bytearray()
    pending = data
    try:
        while True:
            out += inflater.decompress(pending, min(_STEP, cap + 1 - len(out)))
            if len(out) > cap:
                raise InflatesTooLarge(f"inflates past {cap:,} bytes")
            pending = inflater.unconsumed_tail
            if not pending:
                break
        out += inflater.flush(cap + 1 - len(out))
    except zlib.error:
        return None
    if len(out) > cap:
        raise InflatesTooLarge(f"inflates past {cap:,} bytes")
    return bytes(out) if inflater.eof else None
