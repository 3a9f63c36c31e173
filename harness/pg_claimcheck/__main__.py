"""`python -m claimcheck` is the same as the `claimcheck` command (whose entry point is `run`).

Ctrl-C and SIGTERM are answered from the first line of this module: importing the harness takes a
second or more on a busy machine, and an interrupt then printed a traceback of the import (or, for
SIGTERM, killed the process with no word and exit -15). Until the command can clean up, there is
nothing to clean up, so the quiet handler says so and leaves at once; then the command takes the
signals over and turns them into a KeyboardInterrupt (pg_claimcheck.server.interrupts).
"""
import os
import signal

INTERRUPTED_EARLY = b"claimcheck: interrupted before anything ran; nothing of this run was left to clean up.\n"


def _quiet(signum: int, frame: object) -> None:
    # os._exit, not an exception: one raised inside an import may be caught there, or printed and dropped
    # by a handler that runs inside an at-fork hook or a destructor.
    os.write(2, INTERRUPTED_EARLY)
    os._exit(2)


for _signum in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(_signum) is not signal.SIG_IGN:  # started ignoring it (nohup, `&`): keep ignoring
        signal.signal(_signum, _quiet)


def run() -> int:
    """The command (the console script's entry point). Its modules load under the quiet handlers; main()
    takes the signals over (pg_claimcheck.server.interrupts.raise_on_interrupts) once it can clean up."""
    from pg_claimcheck.cli import main

    return main()


if __name__ == "__main__":
    code = run()
    # `python -m` only: a KeyboardInterrupt that ended inside a string exec (dataclasses build their methods
    # so, while a verb imports what it runs) leaves CPython's note of an unhandled interrupt, even though
    # main() caught it, and after our exit 2 the interpreter killed itself with SIGINT (exit -2). Every
    # string exec resets that note as it starts: an empty one, last, clears it.
    exec("")
    raise SystemExit(code)
