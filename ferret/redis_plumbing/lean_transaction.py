"""A MULTI/EXEC whose replies nobody reads, sent for a fraction of redis-py's client CPU: ``lean_transaction``
(and ``lean_pipeline``, the same without the transaction).

A worker's start and success bookkeeping is RQ's own commands (about nine a job to start it, seven to end
it), queued on a redis-py pipeline and sent as one transaction; nobody reads what they answer, only whether
one failed. redis-py 8 spends ~5 us of Python per queued command at ``execute`` (packing each one through its
serializer, reading each ``QUEUED`` through its response machinery, running a response callback on each
answer): ~100 us a job, as much as the retrieval's own Redis work.

``LeanTransaction`` is redis-py's ``Pipeline`` with one method replaced, ``_execute_transaction``: the queued
commands are packed by hiredis in one go, sent as one write, and the replies are read off the connection as
they come. Everything else is redis-py's: queueing (RQ's calls are unchanged), the connection from the pool,
retries on a lost connection, WATCH, scripts. What it gives up:

- ``execute`` returns EXEC's raw answers, without redis-py's response callbacks (an HSET's count stays an
  int, a ZADD's too; nothing converts ``OK`` to True). Use it only where the answers are not read.
- A command queued with redis-py's ``EMPTY_RESPONSE`` option, or client-side HIMPORT fieldsets, or a
  connection whose serializer is not hiredis's goes redis-py's own way (nothing of ours queues such).

The errors are redis-py's: a command Redis refused to queue aborts the transaction and its error is raised;
a command that failed inside EXEC raises its ``ResponseError`` (with ``raise_on_error``, the default), the
others applied, as redis-py does; every reply is read off the connection first, so it stays in step.
"""

from __future__ import annotations

from typing import Any

from redis import Redis
from redis.client import EMPTY_RESPONSE, Pipeline
from redis.exceptions import DataError, ExecAbortError, ResponseError, WatchError

try:
    from hiredis import pack_command
    from redis.connection import HiredisRespSerializer
    _HIREDIS_PACKERS: tuple[type, ...] = (HiredisRespSerializer,)
except ImportError:  # redis-py's own transaction then
    pack_command = None  # type: ignore[assignment]
    _HIREDIS_PACKERS = ()

_MULTI = pack_command(("MULTI",)) if pack_command is not None else b""
_EXEC = pack_command(("EXEC",)) if pack_command is not None else b""


class LeanTransaction(Pipeline):
    """redis-py's transaction pipeline, its replies read raw (see the module)."""

    def _execute_transaction(self, connection: Any, commands: Any, raise_on_error: bool) -> list[Any]:
        if _redis_pys_way(connection, commands):
            return super()._execute_transaction(connection, commands, raise_on_error)  # type: ignore[no-any-return]
        packed = b"".join([_MULTI, *(_packed(args) for args, _ in commands), _EXEC])
        connection.send_packed_command([packed])
        refused: list[ResponseError] = []
        for _ in range(len(commands) + 1):  # MULTI's OK, then each command's QUEUED (or why not)
            try:
                connection.read_response()
            except ResponseError as exc:
                refused.append(exc)
        try:
            answers = connection.read_response()
        except ExecAbortError:
            if refused:
                raise refused[0] from None
            raise
        self.watching = False  # EXEC clears any watched keys
        if answers is None:
            raise WatchError("Watched variable changed.")
        if len(answers) != len(commands):
            connection.disconnect()
            raise ResponseError("Wrong number of response items from pipeline execution")
        if raise_on_error:
            self.raise_first_error(commands, answers)
        return list(answers)


class LeanPipeline(Pipeline):
    """redis-py's plain pipeline (no transaction), its replies read raw, each error in its place: the same
    trade as ``LeanTransaction``, for a worker's batch of result scripts (whose answers are ints)."""

    def _execute_pipeline(self, connection: Any, commands: Any, raise_on_error: bool) -> list[Any]:
        if _redis_pys_way(connection, commands):
            return super()._execute_pipeline(connection, commands, raise_on_error)  # type: ignore[no-any-return]
        connection.send_packed_command([b"".join([_packed(args) for args, _ in commands])])
        answers: list[Any] = []
        for _ in commands:  # every reply read off the connection before any is raised: it stays in step
            try:
                answers.append(connection.read_response())
            except ResponseError as exc:
                answers.append(exc)
        if raise_on_error:
            self.raise_first_error(commands, answers)
        return answers


def _redis_pys_way(connection: Any, commands: Any) -> bool:
    """Whether these commands go redis-py's own way: no hiredis, client-side HIMPORT fieldsets, or a command
    queued with ``EMPTY_RESPONSE`` (nothing of ours queues such)."""
    return (pack_command is None or not isinstance(getattr(connection, "_command_packer", None), _HIREDIS_PACKERS)
            or bool(getattr(connection, "himport_registry", None))
            or any(EMPTY_RESPONSE in options for _, options in commands))


def _packed(args: tuple[Any, ...]) -> bytes:
    """One queued command as redis-py's hiredis serializer packs it: a first argument with spaces split
    (``"CLIENT SETNAME"``), byte arrays sent as bytes, what it cannot send a ``DataError``."""
    first = args[0]
    if " " in first if isinstance(first, str) else b" " in first:
        args = (*first.split(), *args[1:])
    try:
        return pack_command(args)  # type: ignore[arg-type, no-any-return]
    except TypeError:
        pass
    try:
        return pack_command(tuple(bytes(arg) if isinstance(arg, bytearray) else arg  # type: ignore[arg-type]
                                  for arg in args))
    except TypeError as exc:
        raise DataError(str(exc)) from exc


def lean_pipeline(client: Redis) -> LeanPipeline:
    """A ``LeanPipeline`` on ``client``'s connection pool (as ``client.pipeline(transaction=False)`` makes)."""
    return LeanPipeline(client.connection_pool, client.response_callbacks, False, None)


def lean_transaction(client: Redis) -> LeanTransaction:
    """A ``LeanTransaction`` on ``client``'s connection pool (as ``client.pipeline()`` makes its own)."""
    return LeanTransaction(client.connection_pool, client.response_callbacks, True, None)
