"""The limits every coordinator keeps on a run: its connections, time, stalls, progress and replacements.

The fork driver (pg_claimcheck.engine.driver), the library runner (pg_claimcheck.libs.runner) and the
Locust master (pg_claimcheck.locust.master) each watch their claimers in their own way (shared memory,
the library's table, Locust's messages), and tell a :class:`Supervisor` what they saw once per
TICK_S; it says when a limit is reached. One constant each, so a run ends for the same reason after
the same time whichever coordinator runs it.
"""
from __future__ import annotations

from typing import Hashable

import psycopg

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.errors import ServerError
from pg_claimcheck.settings import RunSettings, StopReason

TICK_S = 0.1
"""How often a coordinator looks at its run (progress, faults, limits). Between ticks it only takes
the claimers' messages, so it stays off the CPU the server and the workers need."""
STALL_TIMEOUT_S = 30.0
"""No claim by any worker for this long (plus the time two batches of work may take) ends a run
(`stalled`); claims that go on while no job is finished for as long end it too (`no-progress`)."""
MIN_BUDGET_RUN_S = 3.0
"""A run stopped at its share of a check's time budget runs at least this long after its workers'
release, whatever the share: a server slow to start on a busy machine must not leave the run no time
to claim, which would read as no progress (pg_claimcheck.verdict.liveness)."""
MAX_REPLACEMENTS = 40
"""Replacement workers a run may start: the fork driver's, one per kill fault (at most
pg_claimcheck.settings.MAX_FAULTS), and a library's, for workers that exit on their own (a terminated
connection, a restart). Past it the workers keep dying, which is a broken setup to report, not to
respawn forever."""


def check_headroom(conn: psycopg.Connection, needed: int, *, who: str, lower: str) -> None:
    """Refuse a run the server has no room for, before any claimer starts (docs/contracts.md §5): the
    server's, the role's and the database's limits, counting other roles' sessions. `needed`: the
    connections the run will open besides `conn`; `who`, what they are, in words; `lower`, the option
    that asks for fewer."""
    free = conn.execute(QUERIES["connection_headroom"]).fetchone()[0]
    if free < needed:
        raise ServerError(f"the server has room for {free} more connections but the run needs {needed} ({who}); "
                          f"lower {lower} or raise max_connections (or the role's or database's CONNECTION LIMIT, "
                          "which count too)")


def drained(stopped_by: StopReason, settings: RunSettings) -> bool:
    """Did the run go to its end, so that a job it never claimed is lost? A run ended early (a proven
    violation, no progress, its time or claim limit) did not drain: its unclaimed jobs are not lost.
    One without a limit that stalled did: nothing was left that would have claimed them."""
    return stopped_by == StopReason.DRAINED or (settings.drains and stopped_by == StopReason.STALLED)


class Supervisor:
    """Told what the run did at each tick; says which limit, if any, it has reached."""

    def __init__(self, settings: RunSettings, started: float, *, extra_stall_s: float = 0.0,
                 deadline: float | None = None) -> None:
        self.settings, self.started = settings, started
        self.deadline = deadline
        """When the run's share of a check's time budget ends (monotonic; pg_claimcheck.engine.budget), or None."""
        self.stall_limit_s = settings.stall_limit_s(STALL_TIMEOUT_S) + extra_stall_s
        """Seconds without a claim, or without progress, that end the run."""
        self._activity: Hashable = object()
        self._progress: int | None = None
        self.last_activity_at = self.last_progress_at = started

    def saw(self, now: float, activity: Hashable, progress: int | None = None) -> None:
        """`activity` (claims so far, or anything whose change means a claimer is working) and
        `progress` (jobs finished, or None where the coordinator cannot tell) at `now`."""
        if activity != self._activity:
            self._activity, self.last_activity_at = activity, now
        if progress is not None and progress != self._progress:
            self._progress, self.last_progress_at = progress, now

    def excuse(self, now: float) -> None:
        """A quiet spell that is no stall (a fault just landed, the producer's queue is idle)."""
        self.last_activity_at = self.last_progress_at = now

    def since_activity(self, now: float) -> float:
        return now - self.last_activity_at

    def since_progress(self, now: float) -> float:
        return now - self.last_progress_at

    def stalled(self, now: float) -> bool:
        """No activity for the stall limit (a coordinator that leaves its time limit to the claimers
        asks only this: the Locust master)."""
        return self.since_activity(now) > self.stall_limit_s

    def limit(self, now: float) -> StopReason | None:
        """`duration` (--duration: the run's own end), `time-cap` (a condition's cap), `budget` (its share of
        the check's budget), `stalled` (no activity for the
        stall limit), `no-progress` (activity, but no progress), or None."""
        s, elapsed = self.settings, now - self.started
        if s.duration_s is not None and elapsed >= s.duration_s:
            return StopReason.DURATION
        if s.time_cap_s is not None and elapsed >= s.time_cap_s:
            return StopReason.TIME_CAP
        if self.deadline is not None and now >= max(self.deadline, self.started + MIN_BUDGET_RUN_S):
            return StopReason.BUDGET
        if self.stalled(now):
            return StopReason.STALLED
        if self._progress is not None and self.since_progress(now) > self.stall_limit_s:
            return StopReason.NO_PROGRESS
        return None
