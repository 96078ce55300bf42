"""Redis out of reach reaches users as Ferret's error, never redis-py's: the Python client raises
``RedisUnreachable`` (for an enqueue and for a memory write), the command line says one line and exits 3."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ferret
import ferret.settings
from ferret.cli import exit_codes
from ferret.errors import RedisUnreachable
from tests.conftest import ROOT, free_port


def test_the_client_names_an_unreachable_store_and_queue(redis_server):
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings = ferret.settings.load_settings(environ={"FERRET_REDIS__URL": redis_server.url,
                                                       "FERRET_BACKEND__LOCAL__STORE_URL": dead})
    with ferret.connect(settings) as client:
        with pytest.raises(RedisUnreachable, match="memory store did not answer"):
            client.remember("ns", [{"id": "a", "content_body": "x"}])
        with pytest.raises(RedisUnreachable):
            client.enqueue(query="x", namespace="ns")  # the version is read from the store


def test_the_command_line_says_one_line_and_exits_3_when_the_store_is_gone(tmp_path, redis_server):
    memories = tmp_path / "m.jsonl"
    memories.write_text('{"id": "a", "content_body": "x"}\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}, "PYTHONPATH": str(ROOT),
           "FERRET_REDIS__URL": redis_server.url,
           "FERRET_BACKEND__LOCAL__STORE_URL": f"redis://127.0.0.1:{free_port()}/0"}
    done = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(memories), "-n", "ns"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == exit_codes.UNAVAILABLE, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1].startswith("error: ")
