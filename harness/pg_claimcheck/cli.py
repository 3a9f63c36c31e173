"""The `claimcheck` command (also `python -m claimcheck`).

Exit codes: 0 the run finished and every check held; 1 it finished and a violation was found;
2 bad input or environment (one paragraph on stderr, no traceback), or an interrupt.
Each verb lives in its own module under `harness/pg_claimcheck/commands/`.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Sequence

from pg_claimcheck import __version__
from pg_claimcheck.commands import VERBS, load
from pg_claimcheck.server import interrupts

if TYPE_CHECKING:
    from rich.console import Console


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser, with the options of the verb `argv` names (its module imported);
    every other verb is listed by name and help line only. Without `argv`, every verb's options."""
    parser = argparse.ArgumentParser(prog="claimcheck", description="Is a PostgreSQL job queue's claim "
                                     "exactly-once, and what does each claim strategy cost?")
    parser.add_argument("--version", action="version", version=f"claimcheck {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    # The top level takes no option with a value, so the first word not starting with `-` is the verb.
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, line in VERBS.items():
        if chosen is None or name == chosen:
            load(name).register(verbs)
        else:
            verbs.add_parser(name, help=line)
    return parser


def _say(err: Console, text: str) -> None:
    """One error paragraph, password-free; one line in a CI log (wrapped only on a terminal)."""
    from pg_claimcheck.server.redaction import scrub

    err.print(scrub(text), highlight=False, markup=False, soft_wrap=not err.is_terminal)


def _ignore_further_interrupts() -> None:
    """Cleanup is done; another Ctrl-C on the way out must not turn exit code 2 into death by SIGINT."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def _cleanup_account() -> str:
    """What cleanup actually did, as recorded by each step (see pg_claimcheck.server.interrupts)."""
    steps = interrupts.cleaned_up()
    return ", ".join(steps) if steps else "nothing of this run was left to clean up"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    # The verb's module has loaded what it needs; what the CLI itself needs comes after `--help`.
    import psycopg
    from rich.console import Console

    from pg_claimcheck.commands._options import check_reports_dir, check_writable
    from pg_claimcheck.errors import ClaimcheckError, Interrupted
    from pg_claimcheck.libs import npm
    from pg_claimcheck.report.publish import report_console
    from pg_claimcheck.server.leftovers import sweep_local
    from pg_claimcheck.server.provision import DSN_ENV
    from pg_claimcheck.server.redaction import remember

    interrupts.reset()  # the closing message reports this invocation's cleanup only
    remember(getattr(args, "dsn", None))
    remember(os.environ.get(DSN_ENV))
    console, err = report_console(), Console(stderr=True)  # a pipe or a CI log: the table is not squeezed
    # Cleanup is now possible, and a KeyboardInterrupt is caught below: until here pg_claimcheck.__main__'s
    # quiet handler answered (main() is also called in-process, without it).
    interrupts.raise_on_interrupts()
    started = time.monotonic()
    try:
        check_writable(getattr(args, "json", None))  # every verb's --json, before anything runs
        if getattr(args, "writes_reports", False) and args.json is None:
            check_reports_dir()
        for note in sweep_local():  # what killed runs left on this host's disk
            _say(err, f"claimcheck: {note}")
        for path in npm.sweep_partials(npm.cache_root() / "node"):  # and a killed run's first npm install
            _say(err, f"claimcheck: removed {path}, the unfinished npm install of a run that was killed")
        code = args.func(args, console, err)
    except KeyboardInterrupt:
        _ignore_further_interrupts()
        _say(err, f"claimcheck: interrupted; {_cleanup_account()}.")
        return 2
    except Interrupted as exc:
        _ignore_further_interrupts()
        _say(err, f"claimcheck: {exc}; {_cleanup_account()}.")
        return 2
    except ClaimcheckError as exc:
        _say(err, f"claimcheck: error: {exc}")
        return 2
    except psycopg.Error as exc:  # the server went away or refused us mid-run: an environment error
        message = str(exc).strip().replace("\n", " ") or type(exc).__name__
        _say(err, f"claimcheck: error: PostgreSQL: {message}. Nothing was judged; any schema and server "
                  "of this run were cleaned up.")
        return 2
    except OSError as exc:  # a report or spec file that cannot be written
        _say(err, f"claimcheck: error: {exc}")
        return 2
    err.print(f"finished in {time.monotonic() - started:.1f}s", highlight=False)
    return code
