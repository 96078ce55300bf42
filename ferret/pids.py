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
    return True
