"""What a serverless compute's activity monitor sees, from samples of pg_stat_activity (seed 003).

The monitor looks at the client sessions every half second. A session that is not idle (running a
query, idle in a transaction) is activity at that moment; an idle session is activity as of its last
state change (`state_change`, which moves when its last query finished); a running autovacuum worker
or replication connection is activity at that moment. The compute suspends once the latest activity
is older than its threshold. This module is that rule applied to samples we took the same way, and
nothing else: it has no clock, no server and no knowledge of which design made the sessions.

Sampling every half second misses a query of a millisecond while it runs, exactly as the monitor
does; but the query's end moves the session's `state_change`, which the next sample reads, so the
query still counts, as of when it finished. Several queries between two samples count once, as of
the last one's end: that changes no quiet gap longer than the sampling interval, which is all a
threshold of minutes asks about.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

SAMPLE_INTERVAL_S = 0.5
"""The seed's monitor checks sessions every half second; so does the sampler."""
BURST_GAP_S = SAMPLE_INTERVAL_S
"""Activity closer together than one sampling interval is one burst (one wake-up of the design)."""
REGULAR_SPREAD = 0.5
"""Bursts are periodic when every interval between them is within this fraction of their median."""
HOUR_S = 3600.0
NO_SESSION_NOTE = ("it held no session when the window ended: a suspend closes nothing, and its next connection "
                   "resumes the compute (a session opened and closed between two samples is never seen by the "
                   "monitor, as by the compute's own)")

IDLE = "idle"


@dataclass(frozen=True)
class Session:
    """One row of pg_stat_activity, as a sample read it."""

    pid: int
    role: str
    """What follows the run's prefix in application_name (`claimcheck/<run>/<role>`): who opened it."""
    state: str
    state_change: float
    backend_start: float
    query: str
    """The running query, or an idle session's last one ('' before its first)."""


@dataclass(frozen=True)
class Sample:
    at: float
    """The server's clock_timestamp() at the sample, the clock of `state_change` (epoch seconds)."""
    sessions: tuple[Session, ...] = ()
    autovacuum: tuple[str, ...] = ()
    """The queries of autovacuum workers on the run's own tables."""
    replication: int = 0
    """Replication connections on the server (counted, never read further: they are not the run's)."""


@dataclass(frozen=True)
class Activity:
    """One moment the monitor counts as activity, and what caused it."""

    at: float
    cause: str
    role: str
    query: str
    seen: str
    """How the sampler saw it: `running` (not idle at a sample), `ended` (an idle session's state
    change), `connected` (a new session's start), `autovacuum`."""


QUERY_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.I | re.S), c) for p, c in (
    (r"^\s*(UN)?LISTEN\b", "LISTEN"),
    (r"^\s*(COMMIT|END|ROLLBACK)\b", "transaction"),
    (r"^\s*SELECT\s+(1|true|version\(\))\s*;?\s*$", "pool health check"),
    (r"heartbeat|keepalive|last_seen|\bping\b|worker_info|\(worker_id,\s*stats\b", "heartbeat"),
    (r"pg_notify|^\s*NOTIFY\b", "NOTIFY"),
    (r"maintenance|\bexpire|\barchive|\bstalled|\bcleanup|\bprune|\bschedule", "maintenance"),
))
"""Causes read from the query text, first match wins (a library's connections all carry one role)."""
CLAIM_QUERY = re.compile(r"fetch_job|dequeue|get_job|SKIP\s+LOCKED|\bclaim", re.I | re.S)
"""A claim by its text, when the role of its connection does not say (a library's fetch)."""


def cause_of(role: str, query: str, claim_roles: dict[str, str] | None = None) -> str:
    """What a query was for: from its text when that is unambiguous, else from the role of its connection
    (the built-in designs name each connection for its part), else a claim by its text, else `query`."""
    for pattern, cause in QUERY_CAUSES:
        if pattern.search(query):
            return cause
    for prefix, cause in (claim_roles or {}).items():
        if role.startswith(prefix):
            return cause
    return "claim poll" if CLAIM_QUERY.search(query) else "query"


def activities(samples: list[Sample], claim_roles: dict[str, str] | None = None) -> list[Activity]:
    """Every moment of activity the monitor would count, in time order, each once."""
    found: list[Activity] = []
    seen_changes: set[tuple[int, float]] = set()
    live: dict[str, set[int]] = {}
    lost: dict[str, int] = {}
    """Sessions of a role that went away and have not been replaced yet: the next new one is a reconnect."""
    for sample in samples:
        if sample.autovacuum:
            found.append(Activity(sample.at, "autovacuum", "autovacuum", sample.autovacuum[0], "autovacuum"))
        now: dict[str, set[int]] = {}
        for s in sample.sessions:
            now.setdefault(s.role, set()).add(s.pid)
        for role, pids in live.items():
            lost[role] = lost.get(role, 0) + len(pids - now.get(role, set()))
        for s in sample.sessions:
            if s.pid not in live.get(s.role, set()):  # a new session: a connection (a pool growing), or a reconnect
                again = lost.get(s.role, 0) > 0
                if again:
                    lost[s.role] -= 1
                found.append(Activity(s.backend_start, "reconnect" if again else "connect", s.role, "", "connected"))
        live = now
        for s in sample.sessions:
            if s.state != IDLE:
                found.append(Activity(sample.at, cause_of(s.role, s.query, claim_roles), s.role, s.query, "running"))
            elif (s.pid, s.state_change) not in seen_changes:
                seen_changes.add((s.pid, s.state_change))
                if s.query:  # '' until its first query: its state change is its start, counted as the connect
                    found.append(Activity(s.state_change, cause_of(s.role, s.query, claim_roles), s.role, s.query,
                                          "ended"))
    return sorted(found, key=lambda a: a.at)


def bursts(times: list[float], gap_s: float = BURST_GAP_S) -> list[tuple[float, float]]:
    """Activity times grouped into (start, end) bursts: moments closer than `gap_s` are one wake-up."""
    out: list[tuple[float, float]] = []
    for t in sorted(times):
        if out and t - out[-1][1] < gap_s:
            out[-1] = (out[-1][0], t)
        else:
            out.append((t, t))
    return out


@dataclass(frozen=True)
class Quiet:
    """The stretches with no activity, over the span the samples cover."""

    longest_s: float
    """The longest stretch between two moments of activity, or from the last one to the last sample."""
    tail_s: float
    """From the last activity to the last sample (still quiet when sampling ended)."""
    gaps_s: tuple[float, ...]
    """Between consecutive bursts after start-up."""


def quiet(times: list[float], start: float, end: float) -> Quiet:
    """Gaps between bursts of the activity at or after `start` (the window's first sample; what came
    before is the design's start-up, counted from its last moment), up to `end`."""
    before = [t for t in times if t < start]
    after = [t for t in times if start <= t <= end]
    points = ([max(before)] if before else []) + [b[1] for b in bursts(after)]
    starts = ([max(before)] if before else []) + [b[0] for b in bursts(after)]
    gaps = tuple(max(s - e, 0.0) for e, s in zip(points, starts[1:]))
    last = points[-1] if points else start
    tail = max(end - last, 0.0)
    return Quiet(longest_s=max((*gaps, tail)), tail_s=tail, gaps_s=gaps)


def period(times: list[float], start: float) -> float | None:
    """The period of activity after start-up: the median interval between bursts when there are at
    least three bursts and every interval is within REGULAR_SPREAD of the median; else None."""
    starts = [b[0] for b in bursts([t for t in times if t >= start])]
    if len(starts) < 3:
        return None
    intervals = [b - a for a, b in zip(starts, starts[1:])]
    middle = statistics.median(intervals)
    if all(abs(i - middle) <= REGULAR_SPREAD * middle for i in intervals):
        return middle
    return None


@dataclass(frozen=True)
class Resume:
    """What the design did when its sessions were closed as a suspend closes them."""

    reconnected_after_s: float | None
    """From the close to the design's first new session (None: none within the watch)."""
    watched_s: float
    job_claimed_after_s: float | None = None
    """A job enqueued with a notification after the close: how long until the design claimed it."""
    found_by: str | None = None
    """How the claim that took it was woken: `notified`, `listen` (the claim right after a new LISTEN),
    `fallback`, `poll`; a library's job: `executed`)."""
    exited: bool = False
    """The design's worker process exited instead (a library whose loop died with its connection)."""
    job_sent: bool = False
    """A job was enqueued (with its notification, where the design listens) right after the close."""

    def as_dict(self) -> dict[str, Any]:
        return {"reconnected_after_s": _r(self.reconnected_after_s), "watched_s": _r(self.watched_s),
                "job_claimed_after_s": _r(self.job_claimed_after_s), "found_by": self.found_by,
                "worker_exited": self.exited, "job_sent": self.job_sent}


@dataclass(frozen=True)
class Verdict:
    """Would a compute with this threshold suspend, how often would it be woken, and how we know."""

    suspend_after_s: float
    would_suspend: bool | None
    wakes_per_hour: float | None
    """0 when it never suspends (always on); None when the window cannot tell."""
    asleep_share: float | None
    """The share of the time the compute would be suspended (0: always on; None: the window cannot tell)."""
    basis: str
    """`quiet seen`, `period seen`, `interval`, `no activity`, `not seen`."""
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"suspend_after_s": self.suspend_after_s, "would_suspend": self.would_suspend,
                "wakes_per_hour": _r(self.wakes_per_hour), "asleep_share": _r(self.asleep_share),
                "basis": self.basis, "reason": self.reason}


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def verdict(q: Quiet, seen_period: float | None, threshold_s: float, window_s: float, *,
            interval_s: float | None = None, resume: Resume | None = None, holds_sessions: bool = True) -> Verdict:
    """The monitor's answer for `threshold_s`, from the quiet seen and the period seen.

    `interval_s`: the design's own interval between idle claims (a built-in's poll, fallback poll or
    schedule), used only when the window was too short to see one. `resume`: what the design did when a
    suspend closed its sessions (its reconnect wakes the compute again). `holds_sessions`: it still had
    sessions when the window ended (a scheduled drain has none between runs: nothing for a suspend to close).
    """
    def after_suspend(every_s: float | None, how: str) -> tuple[float | None, float | None, str]:
        """Wakes per hour, the share asleep, and why: a cycle is quiet for the threshold, then asleep until
        the next wake (a reconnect, or its next activity)."""
        if holds_sessions and resume is not None and resume.reconnected_after_s is not None:
            d = resume.reconnected_after_s
            return HOUR_S / (threshold_s + d), d / (threshold_s + d), (
                f"; the suspend closes its sessions and it reconnects {d:.2f}s later, which resumes the compute "
                "at once")
        if every_s is not None:
            cycle = max(every_s, threshold_s)
            return HOUR_S / cycle, (cycle - threshold_s) / cycle, f"; woken by its next {how} every {every_s:g}s"
        return None, None, "; what wakes it next was not seen in the window"

    if q.longest_s >= threshold_s:
        every = seen_period if seen_period is not None else interval_s
        wakes, asleep, how = after_suspend(every, "activity")
        return Verdict(threshold_s, True, wakes, asleep, "quiet seen",
                       f"quiet for {q.longest_s:.1f}s, over the threshold{how}")
    recurs = q.gaps_s and q.tail_s <= max(q.gaps_s) + SAMPLE_INTERVAL_S
    if seen_period is not None or recurs:
        what = (f"activity every {seen_period:.1f}s" if seen_period is not None and seen_period > SAMPLE_INTERVAL_S
                else "activity at every sample" if seen_period is not None else "activity recurs")
        return Verdict(threshold_s, False, 0.0, 0.0, "period seen" if seen_period is not None else "activity recurs",
                       f"{what} ({len(q.gaps_s) + 1} bursts in the window, quiet at most {q.longest_s:.1f}s), never "
                       f"quiet for {threshold_s:g}s: always on")
    if interval_s is not None and interval_s > q.tail_s:
        if interval_s < threshold_s:
            return Verdict(threshold_s, False, 0.0, 0.0, "interval",
                           f"its interval ({interval_s:g}s, longer than the window) is under the threshold: "
                           "always on")
        wakes, asleep, how = after_suspend(interval_s, "claim")
        return Verdict(threshold_s, True, wakes, asleep, "interval",
                       f"its interval ({interval_s:g}s, longer than the window) is over the threshold{how}")
    if not q.gaps_s and q.tail_s >= SAMPLE_INTERVAL_S:
        wakes, asleep, how = after_suspend(None, "")
        caveat = "" if q.tail_s >= threshold_s else " (activity recurring less often than that would not show)"
        return Verdict(threshold_s, True, wakes, asleep, "no activity",
                       f"no activity in the window ({window_s:.0f}s), quiet {q.tail_s:.1f}s since its start-up"
                       f"{caveat}{how}")
    return Verdict(threshold_s, None, None, None, "not seen",
                   f"quiet for the last {q.tail_s:.1f}s after earlier activity: a window over "
                   f"{threshold_s:g}s would tell")


@dataclass
class Footprint:
    """One design's idle footprint over one window: the activity and the verdicts."""

    design: str
    window_s: float
    activity: list[Activity]
    quiet: Quiet
    period_s: float | None
    verdicts: list[Verdict]
    start: float
    end: float
    sessions_max: int = 0
    replication_max: int = 0
    resume: Resume | None = None
    notes: list[str] = field(default_factory=list)

    def causes(self) -> dict[str, int]:
        """Moments of activity per cause, start-up included."""
        out: dict[str, int] = {}
        for a in self.activity:
            out[a.cause] = out.get(a.cause, 0) + 1
        return out

    def as_dict(self) -> dict[str, Any]:
        first = self.verdicts[0] if self.verdicts else None
        return {"design": self.design, "window_s": _r(self.window_s), "longest_quiet_s": _r(self.quiet.longest_s),
                "quiet_at_end_s": _r(self.quiet.tail_s), "period_s": _r(self.period_s),
                "would_suspend": first.would_suspend if first else None,
                "wakes_per_hour": _r(first.wakes_per_hour) if first else None,
                "basis": first.basis if first else None,
                "causes": self.causes(), "verdicts": [v.as_dict() for v in self.verdicts],
                "sessions_max": self.sessions_max, "replication_connections_max": self.replication_max,
                "resume": self.resume.as_dict() if self.resume else None, "notes": self.notes,
                "timeline": [{"t_s": _r(a.at - self.start), "cause": a.cause, "role": a.role, "seen": a.seen,
                              "query": a.query[:120]} for a in self.activity]}


def footprint(design: str, samples: list[Sample], window_start: float, thresholds: list[float], *,
              interval_s: float | None = None, resume: Resume | None = None,
              claim_roles: dict[str, str] | None = None) -> Footprint:
    """The monitor's reading of `samples`: activity before `window_start` is the design's start-up."""
    found = activities(samples, claim_roles)
    end = samples[-1].at if samples else window_start
    times = [a.at for a in found]
    q = quiet(times, window_start, end)
    p = period(times, window_start)
    holds = bool(samples and samples[-1].sessions)
    verdicts = [verdict(q, p, t, end - window_start, interval_s=interval_s, resume=resume, holds_sessions=holds)
                for t in thresholds]
    notes = [] if holds else [NO_SESSION_NOTE]
    return Footprint(design, end - window_start, found, q, p, verdicts, window_start, end,
                     sessions_max=max((len(s.sessions) for s in samples), default=0),
                     replication_max=max((s.replication for s in samples), default=0), resume=resume, notes=notes)
