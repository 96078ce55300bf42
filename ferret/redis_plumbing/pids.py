"""Whether a process id names a live process."""

from __future__ import annotations

import os
from contextlib import suppress


def pid_alive(pid: int, reap_own_child: bool = False) -> bool:
    """True while ``pid`` runs (or is not ours to signal). ``reap_own_child``:
    when it is our own child that has exited, reap it and say False (a zombie
    still answers signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if reap_own_child:
        with suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """An exited process its parent has not reaped yet (Linux's /proc; elsewhere: not known, False).
    Someone else's child that exited stays a zombie until its parent (often init) reaps it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
