"""A Lua script registered once a client, for objects made per job or per write that each send one.

``register_script`` hashes the script's text every time it is called; a ``ChangeLog`` is made for every
memory write and every job's catch-up, a ``RedisAffinity`` for every job, and registering their scripts in
their constructors did that work each time. ``registered`` keeps the ``Script`` per client (held weakly:
a client that goes away takes its scripts with it) and per source text. redis-py's ``Script`` loads itself
again on ``NOSCRIPT`` (a restarted server), so one kept for the client's life stays good."""

from __future__ import annotations

import weakref
from typing import Any

from redis.commands.core import Script

_SCRIPTS: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()


def registered(client: Any, source: str) -> Script:
    """``source`` registered on ``client`` (a redis-py client, standalone or cluster), once a client."""
    scripts = _SCRIPTS.get(client)
    if scripts is None:
        scripts = _SCRIPTS[client] = {}
    script = scripts.get(source)
    if script is None:
        script = scripts[source] = client.register_script(source)
    return script
