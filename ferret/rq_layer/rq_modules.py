"""Replace one of RQ's functions in every loaded RQ module that holds it: ``replace_in_rq``.

RQ's modules import their helpers by name (``from rq.utils import now``), so replacing a helper means
setting it on each module that holds a copy; a module imported later takes whatever ``rq.utils`` holds then.
"""

from __future__ import annotations

import sys
from typing import Any


def replace_in_rq(attribute: str, swaps: dict[Any, Any]) -> None:
    """In every loaded ``rq`` module, ``attribute`` becomes ``swaps[held]`` where it holds a key of ``swaps``."""
    for name, module in list(sys.modules.items()):
        if name != "rq" and not name.startswith("rq."):
            continue
        held = getattr(module, attribute, None)
        if held in swaps:
            setattr(module, attribute, swaps[held])
