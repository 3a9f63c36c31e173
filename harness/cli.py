"""The `claimcheck` command (also `python -m claimcheck`).

Exit codes: 0 the run finished and every check held; 1 it finished and a violation was found;
2 bad input or environment (one paragraph on stderr, no traceback), or an interrupt.
Each verb lives in its own module under `harness/commands/`.
"""
from __future__ import annotations

import argparse
import signal
import time
from typing import Sequence

import psycopg
from rich.console import Console

from claimcheck import __version__
from claimcheck.commands import VERBS
from claimcheck.errors import ClaimcheckError, Interrupted

REPORT_WIDTH_WHEN_PIPED = 400  # tables take their natural width; a CI log does not wrap


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claimcheck", description="Is a PostgreSQL job queue's claim "
                                     "exactly-once, and what does each claim strategy cost?")
    parser.add_argument("--version", action="version", version=f"claimcheck {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb in VERBS:
        verb.register(verbs)
    return parser


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console, err = Console(), Console(stderr=True)
    if not console.is_terminal:  # a pipe or a CI log: don't squeeze the table into 80 columns
        console = Console(width=REPORT_WIDTH_WHEN_PIPED)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    started = time.monotonic()
    try:
        code = args.func(args, console, err)
    except KeyboardInterrupt:
        err.print("claimcheck: interrupted; workers stopped, schema dropped, any server we started stopped.")
        return 2
    except Interrupted as exc:
        err.print(f"claimcheck: {exc}; schema dropped, any server we started stopped.")
        return 2
    except ClaimcheckError as exc:
        err.print(f"claimcheck: error: {exc}", highlight=False, markup=False)
        return 2
    except psycopg.Error as exc:  # the server went away or refused us mid-run: an environment error
        message = str(exc).strip().replace("\n", " ") or type(exc).__name__
        err.print(f"claimcheck: error: PostgreSQL: {message}. Nothing was judged; any schema and server "
                  "of this run were cleaned up.", highlight=False, markup=False)
        return 2
    except OSError as exc:  # a report or spec file that cannot be written
        err.print(f"claimcheck: error: {exc}", highlight=False, markup=False)
        return 2
    err.print(f"finished in {time.monotonic() - started:.1f}s", highlight=False)
    return code
