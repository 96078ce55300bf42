"""A Lua script registered once a client, for objects made per job or per write that each send one.

``register_script`` hashes the script's text every time it is called; a ``ChangeLog`` is made for every
memory write and every job's catch-up, a ``RedisAffinity`` for every job, and registering their scripts in
their constructors did that work each time. ``registered`` keeps the ``Script`` per client (held weakly:
a client that goes away takes its scripts with it) and per source text. redis-py's ``Script`` loads itself
again on ``NOSCRIPT`` (a restarted server), so one kept for the client's life stays good.

On a Redis Cluster, redis-py's ``Script`` loads itself with ``SCRIPT LOAD`` sent to every primary: with one
primary down, every tenant's first call of a script failed, the healthy shards' tenants too. A cluster
client's script is a ``SlotScript`` instead: ``EVALSHA`` on the node of its keys' slot and, when that node
does not have it, ``EVAL`` there, which loads it on that node only; a dead shard touches its own tenants
alone."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError


class SlotScript:
    """A Lua script for a Redis Cluster client, called as redis-py's ``Script`` is (``keys``, ``args``,
    ``client``), loaded only on the nodes that run it."""

    def __init__(self, client: RedisCluster, source: str) -> None:
        self.registered_client = client
        self.script = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # Redis names a script by its SHA-1

    def __call__(self, keys: Sequence[Any] | None = None, args: Iterable[Any] | None = None,
                 client: Any = None) -> Any:
        client = self.registered_client if client is None else client
        keys, args = list(keys or []), list(args or [])
        if hasattr(client, "command_stack"):  # a pipeline: sent later, a NOSCRIPT could not be answered here
            return client.eval(self.script, len(keys), *keys, *args)
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:  # not on that node yet: EVAL loads it there (and only there)
            return client.eval(self.script, len(keys), *keys, *args)


_SCRIPTS: weakref.WeakKeyDictionary[Any, dict[str, Script | SlotScript]] = weakref.WeakKeyDictionary()


def script_for(client: Any, source: str) -> Script | SlotScript:
    """``source`` as a script of ``client``: redis-py's ``Script`` on a standalone client, a ``SlotScript``
    on a cluster client."""
    return SlotScript(client, source) if isinstance(client, RedisCluster) else client.register_script(source)


def registered(client: Any, source: str) -> Script | SlotScript:
    """``source`` registered on ``client`` (a redis-py client, standalone or cluster), once a client."""
    scripts = _SCRIPTS.get(client)
    if scripts is None:
        scripts = _SCRIPTS[client] = {}
    script = scripts.get(source)
    if script is None:
        script = scripts[source] = script_for(client, source)
    return script
