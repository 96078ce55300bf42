"""A forking worker's kept work horse (``ferret.rq_layer.kept_horse``): many jobs a horse, a fresh one after
``service.jobs_per_horse``, and the isolation the class promises: a job that kills its horse ends
``failed`` and takes nothing else with it; a horse killed between two jobs costs no job; the worker's
stop lets its horse go; a worker killed outright leaves no horse behind. Real redis-server, real worker
processes; a result names the process that ran its job (``worker``: host:pid)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import wait_until
from tests.timing import scaled


def _ran_in(result) -> int:
    return int(result.worker.rsplit(":", 1)[1])


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # exited, waiting for its parent (or init) to reap it


def _started(redis_client, job_id: str) -> bool:
    return (redis_client.hget(f"rq:job:{job_id}", "status") or b"") == b"started"


def _one_after_another(producer, namespace: str, count: int) -> list:
    results = []
    for i in range(count):
        handle = producer.enqueue({"query": f"BTC thesis {i}", "namespace": namespace, "queue": "batch",
                                   "deadline_seconds": 60})
        results.append(producer.wait(handle, scaled(30)))
    assert all(result is not None and result.status == "ok" for result in results), \
        [(r.status, r.error) if r else None for r in results]
    return results


def _kept_horse(producer, namespace: str, worker_pid: int) -> int:
    """The horse of a forking worker (the setting's jobs per horse), once two jobs have run in it; it waits
    for the next job."""
    pids = {_ran_in(result) for result in _one_after_another(producer, namespace, 2)}
    assert len(pids) == 1 and worker_pid not in pids, "two jobs one after the other ran in one horse"
    (horse,) = pids
    assert _children(worker_pid) == [horse]
    return horse


def test_a_horse_serves_jobs_per_horse_jobs_then_a_fresh_one_does(producer, start_workers, sample_namespace):
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env={"FERRET_SERVICE__JOBS_PER_HORSE": "4"})
    pids = [_ran_in(result) for result in _one_after_another(producer, sample_namespace, 10)]
    assert parent.pid not in pids, "the jobs run in a work horse, not in the worker"
    assert pids[0:4] == [pids[0]] * 4 and pids[4:8] == [pids[4]] * 4 and pids[8:] == [pids[8]] * 2
    assert len({pids[0], pids[4], pids[8]}) == 3


def test_one_job_a_horse_is_rqs_own_horse(producer, start_workers, sample_namespace):
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env={"FERRET_SERVICE__JOBS_PER_HORSE": "1"})
    pids = [_ran_in(result) for result in _one_after_another(producer, sample_namespace, 4)]
    assert len(set(pids)) == 4 and parent.pid not in pids


def test_a_job_that_kills_its_horse_ends_failed_and_the_next_job_gets_a_fresh_horse(producer, start_workers,
                                                                                    redis_client, sample_nous):
    sample_nous.delay = 30.0  # for the searches made slow below
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env=nous_env(sample_nous, timeout_seconds=60))
    first = producer.wait(producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 60}),
                          scaled(60))
    assert first is not None and first.status == "ok"
    horse = _ran_in(first)
    sample_nous.slow_first = 1  # the next search hangs: the job is running in the horse when it dies
    handle = producer.enqueue({"query": "SOL funding", "queue": "batch", "deadline_seconds": 60})
    assert wait_until(lambda: _started(redis_client, handle.job_id), scaled(20)), "the job started"
    assert _children(parent.pid) == [horse], "the job runs in the horse that ran the first"
    os.kill(horse, signal.SIGKILL)
    killed = producer.wait(handle, scaled(20))
    assert killed is not None and killed.status == "failed" and "work horse died" in killed.error
    after = producer.wait(producer.enqueue({"query": "ETH staking", "queue": "batch", "deadline_seconds": 60}),
                          scaled(30))
    assert after is not None and after.status == "ok" and _ran_in(after) not in (horse, parent.pid)
    assert parent.poll() is None, "the worker itself survives"


def test_a_horse_killed_between_two_jobs_costs_no_job(producer, start_workers, sample_namespace):
    (parent,) = start_workers(1, "--worker-class", "fork")
    horse = _kept_horse(producer, sample_namespace, parent.pid)
    os.kill(horse, signal.SIGKILL)
    assert wait_until(lambda: _gone(horse), scaled(10)), "the horse killed"
    results = _one_after_another(producer, sample_namespace, 3)  # each ok: none is taken for the dead horse's
    assert {_ran_in(result) for result in results} - {horse, parent.pid}


def test_a_stopped_worker_lets_its_horse_go(producer, start_workers, sample_namespace):
    (parent,) = start_workers(1, "--worker-class", "fork")
    horse = _kept_horse(producer, sample_namespace, parent.pid)
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=scaled(30)) == 0
    assert wait_until(lambda: _gone(horse), scaled(10)), "the horse gone with its worker"


def test_a_worker_killed_outright_leaves_no_horse_behind(producer, start_workers, sample_namespace):
    (parent,) = start_workers(1, "--worker-class", "fork")
    horse = _kept_horse(producer, sample_namespace, parent.pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_until(lambda: _gone(horse), scaled(10)), "the horse, its pipe closed, exits by itself"


def test_a_watch_cut_short_lets_the_horse_go_with_its_job_and_the_next_job_gets_its_own(
        env, producer, redis_client, sample_nous, monkeypatch):
    """The worker's watch over its horse ends before the horse answers (Redis out of reach at a heart-beat:
    the job is the reaper's, the worker goes on). The horse still runs that job: it is let go with it, and
    the next job goes to a fresh horse. Kept, the first job's answer, read as the second's, ended the second
    ``failed`` before it had run. A worker in this process, its horses forked from it."""
    import redis

    from ferret.rq_layer.runner import build_worker
    from ferret.settings import load_settings

    settings = load_settings(environ={**env, **nous_env(sample_nous, timeout_seconds=60),
                                      "FERRET_PIPELINE__TIMEOUT_SECONDS": "60"})
    worker = build_worker(redis_client, settings, ["batch"], worker_class="fork")
    worker.job_monitoring_interval = 1
    sample_nous.delay, sample_nous.slow_first = 2.5, 1  # the first job's search: past a watch's second
    first, second = (producer.enqueue({"query": query, "queue": "batch", "deadline_seconds": 60})
                     for query in ("BTC thesis", "SOL funding"))
    beats: list[str] = []
    beat = worker.maintain_heartbeats

    def away_once(job, execution):
        beats.append(job.id)
        if len(beats) == 1:
            raise redis.ConnectionError("Redis out of reach (the test's)")
        return beat(job, execution)

    monkeypatch.setattr(worker, "maintain_heartbeats", away_once)
    worker.work(burst=True, with_scheduler=False)
    assert beats[0] == first.job_id
    later = producer.wait(second, scaled(30))
    assert later is not None and later.status == "ok", (later.status, later.error) if later else None
    earlier = producer.wait(first, scaled(30))  # its horse, let go, finished it
    assert earlier is not None and earlier.status == "ok", (earlier.status, earlier.error) if earlier else None
    assert _ran_in(earlier) != _ran_in(later)


def test_a_worker_stopped_mid_job_lets_the_job_finish_then_its_horse_go(producer, start_workers, redis_client,
                                                                        sample_nous):
    sample_nous.delay, sample_nous.slow_first = 2.0, 1  # the job is in its search when the stop comes
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env={
        **nous_env(sample_nous, timeout_seconds=60), "FERRET_PIPELINE__TIMEOUT_SECONDS": "60"})
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 60})
    assert wait_until(lambda: _started(redis_client, handle.job_id), scaled(20)), "the job started"
    (horse,) = _children(parent.pid)
    parent.send_signal(signal.SIGTERM)
    result = producer.wait(handle, scaled(30))
    assert result is not None and result.status == "ok" and _ran_in(result) == horse
    assert parent.wait(timeout=scaled(30)) == 0
    assert wait_until(lambda: _gone(horse), scaled(10)), "the horse gone with its worker"


def test_the_worker_hears_of_a_job_from_its_horse_not_by_reading_its_result_back(producer, start_workers,
                                                                                 redis_client, sample_namespace):
    """The horse sends the job's result with its answer; the worker's observers are fed from it, so nothing
    reads the result back from Redis (what RQ's own horse needs: a round trip, the result inflated and checked
    again). Every command Redis runs is watched (``MONITOR``) while two jobs run one after the other: the
    worker takes the second only once it is done with the first, its observers included."""
    import threading

    start_workers(1, "--worker-class", "fork")
    _one_after_another(producer, sample_namespace, 1)  # the horse is forked and its index open
    seen: list[str] = []
    with redis_client.monitor() as monitor:
        def watch() -> None:
            while "ECHO the-end" not in (command := monitor.next_command()["command"]):
                seen.append(command)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        handles = []
        for query in ("BTC thesis", "SOL funding"):
            handles.append(producer.enqueue({"query": query, "namespace": sample_namespace, "queue": "batch"}))
            assert wait_until(lambda: redis_client.exists(f"ferret:result:{handles[-1].job_id}"), scaled(30))
        redis_client.echo("the-end")
        watcher.join(scaled(10))
    assert not watcher.is_alive()
    first = handles[0].job_id
    assert any(f"ferret:result:{first}" in command for command in seen), "the watch saw the result written"
    assert [command for command in seen if command.startswith(("GET", "GETRANGE")) and first in command] == []
    assert producer.result(first).status == "ok"
