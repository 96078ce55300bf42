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
