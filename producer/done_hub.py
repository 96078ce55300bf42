"""Many waiters, one connection: results announced by Redis pub/sub.

A blocking waiter holds a connection in a blocking move (BLMOVE) of its job's done list. On an
event loop with a thousand waiters that would be a thousand connections, so
``AsyncProducer`` waits here instead: when a worker writes a result, its
script also publishes on a channel named as the done list
(``ferret.results``); the hub holds one subscriber connection, subscribes
to a job's channel while someone waits for it, and wakes that job's
waiters when the message comes.

The loop stays responsive with a thousand waiters arriving at once:
subscriptions asked for in one turn of the loop go out as one ``SUBSCRIBE``
(and unsubscriptions as one ``UNSUBSCRIBE``), and the reader hands the loop
back after every ``YIELD_EVERY`` messages it takes from its buffer.

Pub/sub is at most once: a message published while the subscriber
reconnects is lost. Waiters do not depend on it alone: a waiter reads the
result once subscribed (so a result written before the subscription is
seen), and again at every slice of its wait (``ferret.results``'
``WAIT_SLICE_SECONDS``). A lost message delays a waiter by at most a slice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis
import redis.asyncio as aredis

from ferret import keys

logger = logging.getLogger(__name__)

SUBSCRIBE_WAIT_SECONDS = 2.0  # a waiter goes on without the confirmation after this (its slices cover it)
YIELD_EVERY = 32  # messages the reader handles before it lets other tasks run
MAX_CHANNELS_PER_COMMAND = 1_000


class _Channel:
    __slots__ = ("confirmed", "waiters")

    def __init__(self, confirmed: asyncio.Future[None]) -> None:
        self.confirmed = confirmed
        self.waiters: set[asyncio.Event] = set()


class DoneHub:
    def __init__(self, client: aredis.Redis) -> None:
        self._client = client
        self._pubsub: aredis.client.PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._channels: dict[str, _Channel] = {}
        self._to_subscribe: set[str] = set()
        self._to_unsubscribe: set[str] = set()
        self._flushing: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self.messages = 0  # announcements received (for tests and benchmarks)

    def watch(self, job_id: str) -> _Watch:
        """``async with hub.watch(job_id) as announced``: an event set when the job's result is
        announced, subscribed to before the block runs (or after ``SUBSCRIBE_WAIT_SECONDS``
        without a confirmation: the waiter's slices cover it)."""
        return _Watch(self, keys.done(job_id))

    def _join(self, name: str, event: asyncio.Event) -> _Channel:
        channel = self._channels.get(name)
        if channel is None:
            channel = self._channels[name] = _Channel(asyncio.get_running_loop().create_future())
            self._to_unsubscribe.discard(name)
            self._to_subscribe.add(name)
            self._flush_soon()
        channel.waiters.add(event)
        return channel

    def _leave(self, name: str, channel: _Channel, event: asyncio.Event) -> None:
        channel.waiters.discard(event)
        if not channel.waiters and self._channels.get(name) is channel:
            del self._channels[name]
            if name in self._to_subscribe:
                self._to_subscribe.discard(name)
            else:
                self._to_unsubscribe.add(name)
                self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush(), name="ferret-done-hub-subscribe")

    async def _flush(self) -> None:
        """Send the subscriptions and unsubscriptions asked for since the last flush, in bulk."""
        try:
            async with self._opening:  # redis-py's PubSub takes a connection per concurrent first subscribe
                if self._pubsub is None:
                    pubsub = self._client.pubsub()
                    await pubsub.connect()
                    self._pubsub = pubsub
                    self._reader = asyncio.get_running_loop().create_task(self._read(), name="ferret-done-hub")
            while self._to_subscribe or self._to_unsubscribe:
                if self._to_unsubscribe:
                    names = _take(self._to_unsubscribe)
                    await self._pubsub.unsubscribe(*names)
                if self._to_subscribe:
                    names = _take(self._to_subscribe)
                    # one timer per batch, not per waiter: past it, waiters go on unconfirmed
                    asyncio.get_running_loop().call_later(SUBSCRIBE_WAIT_SECONDS, self._give_up, names)
                    await self._pubsub.subscribe(*names)
        except (redis.RedisError, OSError) as exc:  # the waiters' slices read the results anyway
            logger.warning("could not subscribe to job announcements (%s); waiting by reading in slices", exc)

    async def _read(self) -> None:
        assert self._pubsub is not None
        handled = 0
        while True:  # until close(): a reader that stopped when idle could miss a new waiter
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except (redis.RedisError, OSError) as exc:
                logger.info("job announcements interrupted (%s); reconnecting", exc)
                await asyncio.sleep(0.5)
                continue
            except RuntimeError:  # nothing subscribed right now
                await asyncio.sleep(0.05)
                continue
            handled += 1
            if handled % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # buffered messages are read without a pause: let the loop run
            if not message:
                continue
            raw = message["channel"]
            channel = self._channels.get(raw.decode() if isinstance(raw, bytes) else str(raw))
            if channel is None:
                continue
            if message["type"] == "subscribe":
                if not channel.confirmed.done():
                    channel.confirmed.set_result(None)
            elif message["type"] == "message":
                self.messages += 1
                for event in channel.waiters:
                    event.set()

    def _give_up(self, names: list[str]) -> None:
        for name in names:
            channel = self._channels.get(name)
            if channel is not None and not channel.confirmed.done():
                channel.confirmed.set_result(None)

    async def close(self) -> None:
        for task in (self._flushing, self._reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._pubsub is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                await self._pubsub.aclose()


class _Watch:
    """The waiter's side of ``DoneHub.watch`` (a plain class: a thousand of them start in one
    turn of the loop, and a generator-based context manager costs more)."""

    __slots__ = ("_channel", "_event", "_hub", "_name")

    def __init__(self, hub: DoneHub, name: str) -> None:
        self._hub, self._name, self._event = hub, name, asyncio.Event()
        self._channel: _Channel | None = None

    async def __aenter__(self) -> asyncio.Event:
        self._channel = self._hub._join(self._name, self._event)
        if not self._channel.confirmed.done():
            await self._channel.confirmed
        return self._event

    async def __aexit__(self, *exc: object) -> None:
        if self._channel is not None:
            self._hub._leave(self._name, self._channel, self._event)


def _take(names: set[str]) -> list[str]:
    taken: list[str] = []
    while names and len(taken) < MAX_CHANNELS_PER_COMMAND:
        taken.append(names.pop())
    return taken
