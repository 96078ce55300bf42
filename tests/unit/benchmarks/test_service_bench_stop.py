"""The service bench never hangs on a worker that will not stop."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ferret.bench.common import wait_or_kill

DEAF_TO_SIGTERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "print('ready', flush=True); time.sleep(60)")


def test_a_worker_deaf_to_sigterm_is_killed_and_fails_the_bench():
    process = subprocess.Popen([sys.executable, "-c", DEAF_TO_SIGTERM], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    process.terminate()
    with pytest.raises(RuntimeError, match=r"did not stop on SIGTERM within 0\.5 s"):
        wait_or_kill(process, 0.5, "a test worker did not stop on SIGTERM")
    assert process.returncode is not None and process.returncode < 0  # killed, not left behind


def test_a_worker_that_stops_is_waited_for():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_or_kill(process, 30, "a test worker did not finish")
    assert process.returncode == 0
