"""``ferret serve``'s app run as the server process of ``ferret bench http``, with a stall meter on its event
loop (``ferret.bench.loop_stall``, from the SIGUSR1 it is sent on): at shutdown it writes the loop's longest
stall and the process's peak RSS to the file named by its argument.
Usage: python -m ferret.bench.http_server_probe PORT OUT.json"""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from ferret.bench.loop_stall import StallMeter
from ferret.producer.api import connect_async
from ferret.producer.http_guard import serve
from ferret.serve.app import build_app
from ferret.settings import load_settings


class _Metered:
    """The app, with a stall meter started at the lifespan's start and read at its end."""

    def __init__(self, app: Any, out: Path) -> None:
        self.app, self.out = app, out

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        meter: StallMeter | None = None

        async def receiving() -> dict[str, Any]:
            nonlocal meter
            message = await receive()
            if message["type"] == "lifespan.startup":
                def start_meter() -> None:
                    nonlocal meter
                    meter = meter or StallMeter().start()
                asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, start_meter)
            elif message["type"] == "lifespan.shutdown" and meter is not None:
                stalls = await meter.stop()
                peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                self.out.write_text(json.dumps({**stalls, "peak_rss_mib": round(peak_kib / 1024, 1)}))
            return message
        await self.app(scope, receiving, send)


def main() -> None:
    port, out = int(sys.argv[1]), Path(sys.argv[2])
    settings = load_settings()
    serve(_Metered(build_app(settings, connect_async(settings), mcp=False), out), "127.0.0.1", port)


if __name__ == "__main__":
    main()
