"""One client shared by many threads, as an agent host's threads share it (a real redis-server)."""

from __future__ import annotations

import threading

from ferret.redis_plumbing.redis_conn import client_for


def test_threads_past_the_pool_size_wait_for_a_connection_instead_of_failing(redis_server):
    """redis-py's own pool raises MaxConnectionsError past 100 commands at once; 250 threads each
    holding a connection in a blocking read must all be served."""
    client = client_for(redis_server.url)
    failures: list[BaseException] = []

    def wait_on_an_empty_list() -> None:
        try:
            client.blpop(["ferret-test:nothing"], 0.3)
        except BaseException as exc:  # any failure fails the test below
            failures.append(exc)

    threads = [threading.Thread(target=wait_on_an_empty_list) for _ in range(250)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == [] and not any(thread.is_alive() for thread in threads)
    client.close()


def test_a_new_pool_has_every_slot_free_and_a_thread_past_them_waits_its_turn(redis_server, monkeypatch):
    """The pool's queue of free slots is born full (no fill a slot at a time): as many slots as the pool
    may open connections, each opened on first use, and a thread past them waits for one to be handed
    back rather than failing, after a reset (a fork's child) too."""
    from ferret.redis_plumbing import redis_conn

    monkeypatch.setattr(redis_conn, "MAX_CONNECTIONS", 2)
    client = client_for(redis_server.url)
    pool = client.connection_pool
    assert pool.pool.qsize() == 2 and pool.pool.full()
    pool.reset()  # what redis-py does in a forked child
    assert pool.pool.qsize() == 2 and pool.pool.full()
    served: list[object] = []
    threads = [threading.Thread(target=lambda: served.append(client.blpop(["ferret-test:nothing"], 0.3)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert served == [None, None, None]
    assert len(pool._connections) <= 2  # a thread past the two waited for one of them, opened no third
    client.close()
