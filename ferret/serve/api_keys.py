"""HTTP API keys: made once, stored only as a hash, scoped to namespaces.

A key reads ``fk_<id>_<secret>``: the id finds its record (``ferret.keys.api_key``) in one read, the
secret (32 random bytes) is checked against the SHA-256 stored there, in constant time. The key itself is
printed once by ``ferret keys create`` and kept nowhere. A record is data read from Redis: one that does not
parse is a key that does not work, never an error that names it."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import redis
import redis.asyncio as aredis

from ferret import keys
from ferret.contract import parse_request
from ferret.errors import InvalidRequest
from ferret.settings import LimitSettings
from ferret.settings.service import RATE_PATTERN

KEY_SHAPE = re.compile(r"fk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
RATE_SHAPE = re.compile(RATE_PATTERN)


@dataclass(frozen=True)
class ApiKey:
    """A key's record, as read back (never the key)."""

    key_id: str
    namespaces: tuple[str, ...]
    read_only: bool
    rate: str | None
    label: str
    created_at: float
    revoked_at: float | None

    @property
    def live(self) -> bool:
        return self.revoked_at is None

    def reaches(self, namespace: str) -> bool:
        return namespace in self.namespaces

    def public(self) -> dict[str, Any]:
        """The record as ``ferret keys list`` shows it."""
        return {"id": self.key_id, "namespaces": list(self.namespaces), "read_only": self.read_only,
                "rate": self.rate, "label": self.label, "created_at": self.created_at,
                "revoked_at": self.revoked_at}


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(presented: str) -> str | None:
    """The id inside a presented key, or None when it is not shaped like one of ours."""
    shaped = KEY_SHAPE.fullmatch(presented)
    return shaped.group(1) if shaped else None


def looks_like_a_key(text: str) -> bool:
    """Whether ``text`` holds something shaped like a key (to refuse it in a URL)."""
    return KEY_SHAPE.search(text) is not None


def check_rate(rate: str) -> str:
    if not RATE_SHAPE.match(rate.strip()):
        raise InvalidRequest("rate", f"{rate!r} is not a rate such as 50/second, 600/minute or 10000/hour")
    return rate.strip()


def check_namespaces(namespaces: list[str] | tuple[str, ...], limits: LimitSettings) -> tuple[str, ...]:
    """The namespaces, each checked as a request's namespace is (``InvalidRequest`` naming ``namespace``)."""
    if not namespaces:
        raise InvalidRequest("namespace", "a key needs at least one namespace")
    return tuple(dict.fromkeys(parse_request({"query": "x", "namespace": n}, limits).namespace for n in namespaces))


def _record(fields: Mapping[Any, Any], key_id: str) -> tuple[str, ApiKey] | None:
    """(stored digest, record) from a hash read back, or None when it does not parse."""
    try:
        text = {_text(k): _text(v) for k, v in fields.items()}
        namespaces = json.loads(text["namespaces"])
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            return None
        revoked = text.get("revoked_at")
        return text["hash"], ApiKey(key_id, tuple(namespaces), text.get("read_only") == "1", text.get("rate") or None,
                                    text.get("label", ""), float(text["created_at"]),
                                    float(revoked) if revoked else None)
    except (KeyError, ValueError, UnicodeDecodeError):
        return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def matches(stored_digest: str, presented: str) -> bool:
    return hmac.compare_digest(stored_digest.encode(), digest(presented).encode())


def _now(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6


class KeyStore:
    """Create, list and revoke keys (``ferret keys``), on the queue Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def create(self, namespaces: list[str], read_only: bool = False, rate: str | None = None,
               label: str = "", limits: LimitSettings | None = None) -> tuple[str, ApiKey]:
        """A new key and its record; the key is returned here once and stored nowhere. ``limits``: the
        namespaces' (the settings' ``limits``)."""
        checked = check_namespaces(namespaces, limits or LimitSettings())
        rate = check_rate(rate) if rate else None
        key_id = secrets.token_hex(8)
        key = f"fk_{key_id}_{secrets.token_urlsafe(32)}"
        created = _now(self.client)
        record: dict[Any, str] = {"hash": digest(key), "namespaces": json.dumps(list(checked)),
                                  "read_only": "1" if read_only else "0", "rate": rate or "", "label": label[:200],
                                  "created_at": repr(created)}
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(keys.api_key(key_id), mapping=record)
        pipe.sadd(keys.api_key_ids(), key_id)
        pipe.execute()
        return key, ApiKey(key_id, checked, read_only, rate, label[:200], created, None)

    def all(self) -> list[ApiKey]:
        ids = sorted(_text(i) for i in self.client.smembers(keys.api_key_ids()))
        pipe = self.client.pipeline(transaction=False)
        for key_id in ids:
            pipe.hgetall(keys.api_key(key_id))
        found = []
        for key_id, fields in zip(ids, pipe.execute(), strict=True):
            parsed = _record(fields, key_id) if fields else None
            if parsed is not None:
                found.append(parsed[1])
        return sorted(found, key=lambda k: k.created_at)

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke by id: every server refuses the key within a second (``VerifiedKeys``). An unknown id is
        ``InvalidRequest`` naming ``id``."""
        fields = self.client.hgetall(keys.api_key(key_id)) if re.fullmatch(r"[0-9a-f]{16}", key_id) else {}
        parsed = _record(fields, key_id) if fields else None
        if parsed is None:
            raise InvalidRequest("id", f"no key with id {key_id!r} (ferret keys list shows them)")
        record = parsed[1]
        if record.revoked_at is not None:
            return record
        revoked = _now(self.client)
        self.client.hset(keys.api_key(key_id), "revoked_at", repr(revoked))
        return replace(record, revoked_at=revoked)


async def verify(client: aredis.Redis, presented: str) -> ApiKey | None:
    """The record of a presented key when it is ours and its secret matches (revoked or not), else None."""
    key_id = key_id_of(presented)
    if key_id is None:
        return None
    fields = await client.hgetall(keys.api_key(key_id))
    parsed = _record(fields, key_id) if fields else None
    if parsed is None or not matches(parsed[0], presented):
        return None
    return parsed[1]


class VerifiedKeys:
    """``verify`` with each key's record kept for ``seconds`` in this process: a busy key costs one Redis read
    a second, not one a request. A revoked key is therefore refused by every server within ``seconds``."""

    def __init__(self, client: aredis.Redis, seconds: float = 1.0, most: int = 10_000) -> None:
        self.client, self.seconds, self.most = client, seconds, most
        self._kept: dict[str, tuple[ApiKey, float]] = {}

    async def verify(self, presented: str) -> ApiKey | None:
        now = time.monotonic()
        kept = self._kept.get(presented)
        if kept is not None and kept[1] > now:
            return kept[0]
        found = await verify(self.client, presented)
        if found is not None:
            if len(self._kept) >= self.most:
                self._kept.clear()
            self._kept[presented] = (found, now + self.seconds)
        return found
