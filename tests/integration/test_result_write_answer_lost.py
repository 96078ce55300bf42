"""A result write whose answer is lost (the connection drops after Redis ran the script) is sent again by
the client's retry, finds itself, and is answered as written: the job's report is not dropped, its
observers hear of it, and nothing says another run's result was there. Real redis-server, Ferret's own
client (its retries)."""

from __future__ import annotations

import time

import redis
from redis.connection import AbstractConnection

from ferret.job_ids import job_id_for
from ferret.redis_plumbing.redis_conn import client_for
from ferret.worker.core.resources import build_resources
from ferret.worker.core.run import run_job


def test_a_result_write_whose_answer_was_lost_is_written_once_not_dropped(settings, sample_namespace,
                                                                         monkeypatch, caplog):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    ctx.results.load_write_script()  # as a worker's Redis has it: the first answer read is the script's
    script = ctx.results._write_once
    real_read = AbstractConnection.read_response
    lost: list[object] = []
    writing = False

    def answer_lost(self, *args, **kwargs):  # the script's answer read, then the connection drops
        answer = real_read(self, *args, **kwargs)
        if writing and not lost:
            lost.append(answer)
            self.disconnect()
            raise redis.ConnectionError("connection dropped before the answer arrived")
        return answer

    def write_once(*args, **kwargs):
        nonlocal writing
        writing = True
        try:
            return script(*args, **kwargs)
        finally:
            writing = False

    monkeypatch.setattr(AbstractConnection, "read_response", answer_lost)
    monkeypatch.setattr(ctx.results, "_write_once", write_once)
    now = time.time()
    job_id = job_id_for(sample_namespace, None)
    report = run_job(ctx, {"request": {"query": "BTC thesis", "namespace": sample_namespace},
                           "enqueued_at": now, "deadline_at": now + 60}, job_id)
    assert lost == [1]  # the first send wrote the result; its answer never arrived
    assert not report.dropped and report.trace is not None
    stored = ctx.results.read(job_id)
    assert stored is not None and stored.trace_id == report.result.trace_id and stored.status == "ok"
    assert "dropped" not in caplog.text
