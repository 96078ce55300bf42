"""Run ``ferret.steps`` rules with a blocking redis-py client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from ferret.redis_plumbing.clock import Clock
from ferret.redis_plumbing.redis_retry import PatientRetry, is_out_of_memory
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.redis_plumbing.scripts import SlotScript, script_for
from ferret.steps import Batch, Call, Eval, Now, Op, Replicate, Step, drive

T = TypeVar("T")

# Reads whose reply is immutable: one round asking the same one for several rules sends it once (a batch's
# lines all read their namespace's memory version). Any order of a round's operations is as good as the
# one they are sent in (no rule waits on another within a round), so the others reading it first is one.
_SHARED_READS = frozenset({"GET", "EXISTS", "STRLEN", "TTL", "PTTL"})


def _refused_for_memory(reply: Any) -> bool:
    return isinstance(reply, redis.ResponseError) and is_out_of_memory(reply)


class SyncSteps:
    """Runs rules through ``queue`` (and ``store``, the memory store's client, often the same)."""

    def __init__(self, queue: redis.Redis, store: redis.Redis, clock: Clock, replicas: ReplicaWait) -> None:
        self.clients = {"queue": queue, "store": store}
        self.clock = clock
        self.replicas = replicas
        self._scripts: dict[tuple[str, str], Script | SlotScript] = {}

    def _script(self, op: Eval) -> Script | SlotScript:
        script = self._scripts.get((op.on, op.source))
        if script is None:
            script = self._scripts[(op.on, op.source)] = script_for(self.clients[op.on], op.source)
        return script

    def run(self, rule: Step[T]) -> T:
        return drive(rule, self.do, (redis.ResponseError,))

    def do(self, op: Op) -> Any:
        if isinstance(op, Call):
            return self.clients[op.on].execute_command(*op.args)
        if isinstance(op, Batch):
            with self.clients[op.on].pipeline(transaction=op.transaction) as pipe:
                for args in op.calls:
                    pipe.execute_command(*args)
                return pipe.execute()
        if isinstance(op, Eval):
            return self._script(op)(keys=list(op.keys), args=list(op.args))
        if isinstance(op, Now):
            return self.clock.time()
        if isinstance(op, Replicate):
            return self.replicas(op.what)
        raise TypeError(f"not a step: {op!r}")

    def run_together(self, rules: Sequence[Step[Any]]) -> list[Any]:
        """Run ``rules`` side by side: each round sends every unfinished rule's next operation, one pipeline
        per server, so n rules of k round trips each cost k round trips, not n x k. Each rule's answer, or
        the exception that ended it, in order. A round whose rules write atomically (``Batch`` with
        ``transaction``) is sent as one MULTI/EXEC (each batch stays atomic; so does their sum); on a
        Redis Cluster a round is a plain pipeline (its batches name one slot each). A reply that is an
        error is thrown back into its rule, as ``run`` does; Redis out of reach ends the call."""
        answers: list[Any] = [None] * len(rules)
        pending: dict[int, tuple[Any, BaseException | None]] = {i: (None, None) for i in range(len(rules))}
        while pending:
            asked: dict[int, Op] = {}
            for index, (reply, error) in list(pending.items()):
                rule = rules[index]
                try:
                    asked[index] = rule.throw(error) if error is not None else rule.send(reply)
                except StopIteration as stop:
                    answers[index] = stop.value
                    del pending[index]
                except Exception as exc:
                    answers[index] = exc
                    del pending[index]
            replies = self._round(asked)
            for index, reply in replies.items():
                error = reply if isinstance(reply, redis.ResponseError) else None
                if isinstance(reply, list) and isinstance(asked[index], Batch):
                    error = next((r for r in reply if isinstance(r, redis.ResponseError)), None)
                pending[index] = (None, error) if error is not None else (reply, None)
        return answers

    def _round(self, asked: dict[int, Op]) -> dict[int, Any]:
        """Every operation of one round, at once; each one's reply (an error in place of a reply)."""
        replies: dict[int, Any] = {}
        remote: dict[str, list[int]] = {}
        replicate: list[int] = []
        for index, op in asked.items():
            if isinstance(op, Now):
                replies[index] = self.do(op)
            elif isinstance(op, Replicate):
                replicate.append(index)
            elif isinstance(op, (Call, Batch, Eval)):
                remote.setdefault(op.on, []).append(index)
            else:
                raise TypeError(f"not a step: {op!r}")
        copies: dict[int, int] = {}  # a rule's read the same as an earlier rule's in this round: that one's reply
        first: dict[tuple[str, tuple[Any, ...]], int] = {}
        for server, indexes in list(remote.items()):
            kept = []
            for index in indexes:
                op = asked[index]
                if isinstance(op, Call) and isinstance(op.args[0], str) and op.args[0].upper() in _SHARED_READS:
                    try:
                        seen = first.setdefault((server, op.args), index)
                    except TypeError:  # an argument that is not hashable: sent as it is
                        seen = index
                    if seen != index:
                        copies[index] = seen
                        continue
                kept.append(index)
            remote[server] = kept
        for server, indexes in remote.items():
            client = self.clients[server]
            atomic = any(isinstance(asked[i], Batch) and asked[i].transaction for i in indexes)  # type: ignore[union-attr]
            with client.pipeline(transaction=atomic and not isinstance(client, RedisCluster)) as pipe:
                spans: list[tuple[int, int]] = []
                for index in indexes:
                    start = len(pipe)
                    self._send(pipe, asked[index])
                    spans.append((index, start))
                results = pipe.execute(raise_on_error=False)
            for number, (index, start) in enumerate(spans):
                end = spans[number + 1][1] if number + 1 < len(spans) else len(results)
                replies[index] = results[start:end] if isinstance(asked[index], Batch) else results[start]
            sent = {index: asked[index] for index in indexes}
            self._missing_scripts_loaded(client, sent, replies)
            refused: dict[int, Op] = {index: op for index, op in sent.items()
                                      if not isinstance(op, Batch) and _refused_for_memory(replies[index])}
            if refused:
                replies.update(self._once_there_is_room(client, refused))
        for index, seen in copies.items():
            replies[index] = replies[seen]
        if replicate:  # once for the round: it covers every write sent so far
            done = self.replicas(asked[replicate[0]].what)  # type: ignore[union-attr]
            for index in replicate:
                replies[index] = done
        return replies

    def _send(self, pipe: Any, op: Op) -> None:
        """``op``'s commands, queued on ``pipe``."""
        if isinstance(op, Call):
            pipe.execute_command(*op.args)
        elif isinstance(op, Batch):
            for args in op.calls:
                pipe.execute_command(*args)
        else:
            assert isinstance(op, Eval)
            self._script(op)(keys=list(op.keys), args=list(op.args), client=pipe)

    def _once_there_is_room(self, client: Any, ops: dict[int, Op]) -> dict[int, Any]:
        """Commands and scripts Redis refused for want of memory (``maxmemory`` with ``noeviction``), sent
        again until it takes them; each one's reply.

        Sent alone, a refused write is the client's own retry's to wait out (``PatientRetry``); in a round's
        pipeline, read with ``raise_on_error=False``, the refusal came back as a reply and would have been
        thrown into its rule: a batch enqueueing while Redis was full ended with a traceback. Redis refuses
        a write before running it (a script: at its first write, before any), so sending the refused ones
        again runs each once; they wait as the client's retry does, said once when Redis is full and once
        when it has room (the same episode as the client's own). A round in a transaction is refused whole
        and raised, so the client's retry sends it again itself."""
        retry = client.get_retry() if hasattr(client, "get_retry") else None
        patience = retry if isinstance(retry, PatientRetry) else PatientRetry(type(client).__name__)
        replies: dict[int, Any] = {}
        refusals = 0
        while ops:
            refusals += 1
            patience.wait_for_room(refusals)
            replies.update(self._resent(client, ops))
            self._missing_scripts_loaded(client, ops, replies)
            ops = {index: op for index, op in ops.items() if _refused_for_memory(replies[index])}
        patience.has_room()
        return replies

    def _missing_scripts_loaded(self, client: Any, ops: Mapping[int, Op], replies: dict[int, Any]) -> None:
        """The scripts among ``ops`` that answered ``NOSCRIPT`` in ``replies``, sent again with their scripts
        loaded (``_again_loaded``); their new replies put in ``replies``."""
        unloaded = {index: op for index, op in ops.items()
                    if isinstance(op, Eval) and isinstance(replies[index], NoScriptError)}
        if unloaded:
            replies.update(self._again_loaded(client, unloaded))

    def _again_loaded(self, client: Any, evals: dict[int, Eval]) -> dict[int, Any]:
        """Scripts a round found missing, sent again in a pipeline of their own; each one's reply.

        redis-py's pipeline checks its scripts (SCRIPT EXISTS, then SCRIPT LOAD) before it sends them, but
        a connection lost in between is reconnected and the pipeline sent again as it was: after a failover
        to a replica (which has not its old primary's scripts) its EVALSHAs answer ``NOSCRIPT``. A script
        that answered ``NOSCRIPT`` did not run, so sending it again runs it once. Each script is loaded
        first (a Cluster's pipeline does not check its scripts itself; SCRIPT LOAD reaches every primary)."""
        for source in dict.fromkeys(op.source for op in evals.values()):
            client.script_load(source)
        return self._resent(client, evals)

    def _resent(self, client: Any, ops: Mapping[int, Op]) -> dict[int, Any]:
        """``ops`` sent again, in a pipeline of their own (no transaction); each one's reply, an error in place
        of a reply."""
        with client.pipeline(transaction=False) as pipe:
            for op in ops.values():
                self._send(pipe, op)
            return dict(zip(ops, pipe.execute(raise_on_error=False), strict=True))
