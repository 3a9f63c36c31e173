"""`python -m claimcheck` is the same as the `claimcheck` command (whose entry point is `run`)."""
import os
import sys

from pg_claimcheck.server.interrupts import sigterm_as_interrupt


def run() -> int:
    """The command, with Ctrl-C and SIGTERM answered from its first moment: importing the harness takes
    a second or more on a busy machine, and an interrupt then printed a traceback of the import."""
    sigterm_as_interrupt()
    try:
        from pg_claimcheck.cli import main

        return main()
    except KeyboardInterrupt:
        sys.stderr.write("claimcheck: interrupted before anything ran; nothing of this run was left to clean up.\n")
        sys.stderr.flush()
        # Not `return 2`: an interrupt inside an import leaves Python's own note of an unhandled
        # KeyboardInterrupt, and the interpreter would then end itself with SIGINT (exit -2).
        os._exit(2)


if __name__ == "__main__":
    raise SystemExit(run())
