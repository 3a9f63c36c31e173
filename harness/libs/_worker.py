"""One worker process of `claimcheck lib`: the library's own worker loop with our recording task.

Started by the coordinator as `python -m claimcheck.libs._worker CONFIG_JSON`; SIGTERM (or
SIGINT) asks the library to stop gracefully, and the coordinator SIGKILLs what does not stop.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from claimcheck.libs import load_adapter
from claimcheck.libs._adapter import Recorder, WorkerConfig


PARENT_CHECK_S = 1.0
ORPHAN_GRACE_S = 10.0


async def _orphaned(parent: int, stop: asyncio.Event) -> None:
    """A coordinator that died (SIGKILL, OOM) cannot stop us: stop ourselves, and leave for good
    if the library does not stop in time, so no worker outlives its run."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_CHECK_S)
    stop.set()
    await asyncio.sleep(ORPHAN_GRACE_S)
    os._exit(4)


async def _main(config: WorkerConfig) -> None:
    adapter = load_adapter(config.library)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watch = asyncio.create_task(_orphaned(os.getppid(), stop))
    try:
        await adapter.work(config, Recorder(config), stop)
    finally:
        watch.cancel()


def main() -> int:
    config = WorkerConfig(**json.loads(sys.argv[1]))
    try:
        asyncio.run(_main(config))
    except Exception as exc:  # the library's loop died (its connection was terminated, the server restarted)
        print(f"w{config.worker:02d}: {config.library} worker stopped: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
