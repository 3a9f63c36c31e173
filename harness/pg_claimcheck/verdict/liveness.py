"""Safety or liveness: what a failed run failed at (docs/contracts.md §2 and §6).

A safety violation is something that must never happen, proven from the claims: a job handed out
twice, a job lost, an over-claim, a stale completion. A liveness failure is something that did not
happen within the run's limits: no job finished, no claim committed, jobs left waiting for a retry
not yet due, the server ending the workers' sessions. The first is a broken queue whatever the
machine; the second may be a slow machine, a server setting or a budget too short, and says which.
They have different words (`VIOLATED`, `NO PROGRESS`), exit codes (1, 3) and exceptions.

Pure functions of a judged run's figures: the judge fills them, this module only words them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pg_claimcheck.settings import StopReason

HELD, VIOLATED, NO_PROGRESS = "held", "violated", "no-progress"
"""A run's `outcome` in the JSON; `check` exits 0, 1 and 3 on them (docs/contracts.md §6)."""
WORDS = {HELD: "exactly-once", VIOLATED: "VIOLATED", NO_PROGRESS: "NO PROGRESS"}
"""The verdict as the terminal, the reports and the pytest plugin print it."""
EXIT_CODES = {HELD: 0, VIOLATED: 1, NO_PROGRESS: 3}

SESSION_ENDINGS = {
    "25P03": "idle_in_transaction_session_timeout",
    "25P04": "transaction_timeout",
    "57P05": "idle_session_timeout",
    "57P01": None,  # pg_terminate_backend, or a fast shutdown
    "57P02": None,  # another backend crashed
    "57P03": None,  # the server was starting or stopping
}
"""SQLSTATEs a server sends as it ends a session itself, and the setting behind it where one is."""
SESSION_ENDING_WORDS = {"57P01": "terminated by an administrator or a shutdown",
                        "57P02": "ended because another backend crashed",
                        "57P03": "ended while the server was starting or stopping"}
TIME_STOPS = ("duration",)
"""Stops at a time limit (--duration, a condition's cap, the budget): the run did not drain."""


@dataclass(frozen=True)
class Waiting:
    """What the table says of the jobs a run left behind (our jobs table only; else unknown)."""

    retries: int = 0
    """Jobs queued for a retry not yet due (run_at in the future)."""
    next_retry_s: float = 0.0
    """Seconds from the run's end until the first of them is due."""


def failure(stopped_by: StopReason, stop_reason: str | None, jobs_done: int, seeded: int, left: int,
            elapsed_s: float, waiting: Waiting, session_endings: dict[str, Any],
            server_limits: dict[str, Any]) -> str | None:
    """Why the run made no progress within its limits, in words, or None if it did.

    `left`: jobs the run left unfinished that are neither lost nor a violation (never reached in a
    stalled run, or queued again and not done in a lifecycle run)."""
    if stopped_by == StopReason.NO_PROGRESS:
        cause = stop_reason or "workers kept claiming but no job was finished"
    elif stopped_by == StopReason.STALLED and left:
        cause = f"{stop_reason or 'no claim was committed for the stall limit'}, with {left:,} job(s) left"
        if waiting.retries:
            cause += (f", {waiting.retries:,} of them waiting for a retry not yet due (the next in "
                      f"{waiting.next_retry_s:.0f}s): a backoff longer than the stall limit; a lower "
                      "--backoff-unit makes retries due sooner")
    elif stopped_by in TIME_STOPS and seeded and not jobs_done:
        cause = f"no job was finished in the run's {elapsed_s:.1f}s"
    else:
        return None
    ended = endings_words(session_endings, server_limits)
    return f"{cause}; {ended}" if ended else cause


def endings_words(session_endings: dict[str, Any], server_limits: dict[str, Any]) -> str | None:
    """The sessions the server ended, by cause, named: "the server ended the workers' sessions 52
    times: 25P03 idle_in_transaction_session_timeout (1s)"."""
    named = {state: n for state, n in session_endings.items() if state in SESSION_ENDINGS}
    if not named:
        return None
    parts = []
    for state, n in sorted(named.items(), key=lambda item: -item[1]):
        setting = SESSION_ENDINGS[state]
        if setting is not None:
            value = server_limits.get(setting)
            parts.append(f"{state} {setting}" + (f" = {value}" if value not in (None, "", "0") else "") + f" ×{n:,}")
        else:
            parts.append(f"{state} {SESSION_ENDING_WORDS[state]} ×{n:,}")
    return (f"the server ended the workers' sessions {sum(named.values()):,} time(s): {', '.join(parts)} "
            "(each claim in them was rolled back)")


def run_outcome(run: dict[str, Any]) -> str:
    """A report's run object's outcome: its `outcome` (schema 4), else, in an older report, `held` or
    `violated` by its `exactly_once`. The HTML report and compare word a run dict by it (WORDS)."""
    return run.get("outcome") or (HELD if run["exactly_once"] else VIOLATED)


def worst_outcome(results: Iterable[Any]) -> str:
    """A check's outcome over its runs: a safety violation in any, else a liveness failure in any."""
    outcomes = {r.outcome for r in results}
    return VIOLATED if VIOLATED in outcomes else NO_PROGRESS if NO_PROGRESS in outcomes else HELD


def settings_to_read(session_endings: dict[str, Any]) -> list[str]:
    """The server settings a run's session endings name, to read their values after it."""
    return sorted({name for s in session_endings if (name := SESSION_ENDINGS.get(s))})
