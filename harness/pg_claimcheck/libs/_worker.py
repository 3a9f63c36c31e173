"""One worker process of `claimcheck lib`: the library's own worker loop with our recording task.

Started by the coordinator as `python -m pg_claimcheck.libs._worker` with its config as JSON on stdin
(never argv: the DSN may hold a password, see pg_claimcheck.libs._adapter.WorkerConfig); SIGTERM (or
SIGINT) asks the library to stop gracefully, and the coordinator SIGKILLs what does not stop.
A coordinator that dies sends the SIGTERM too (the kernel does, see pg_claimcheck.server.children), and the
worker then leaves by itself after STOP_GRACE_S.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from pg_claimcheck.libs import library_error, load_adapter
from pg_claimcheck.libs._adapter import Recorder, WorkerConfig

STOP_GRACE_S = 10.0
"""After SIGTERM, how long the library may take to stop before the process leaves anyway: the
coordinator kills what does not stop after as long, and a dead coordinator (the kernel sends the
SIGTERM, see pg_claimcheck.server.children.die_with_parent) no longer can."""


def _stop(stop: asyncio.Event) -> None:
    stop.set()
    asyncio.get_running_loop().call_later(STOP_GRACE_S, os._exit, 4)


async def _main(config: WorkerConfig) -> None:
    adapter = load_adapter(config.library)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stop, stop)
    recorder = Recorder(config)
    recorder.hello()  # the library is imported: what is left of the start-up is its loop's own
    await adapter.work(config, recorder, stop)


def main() -> int:
    config = WorkerConfig(**json.loads(sys.stdin.read()))
    try:
        asyncio.run(_main(config))
    except Exception as exc:  # the library's loop died (its connection was terminated, the server restarted)
        print(f"w{config.worker:02d}: {config.library} worker stopped: {library_error(exc)}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
