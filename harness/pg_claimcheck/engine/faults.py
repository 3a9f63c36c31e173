"""Fault injection: what the coordinator does to workers and the server while a run goes.

Faults are spread over the run by progress (fractions of the jobs claimed), so every kind lands
mid-run whatever the speed: SIGKILL of a worker process (a replacement starts), pg_terminate_backend
of a worker's backend inside a transaction (the worker reconnects), a worker that stalls past its
lease after a claim, and a restart of a server we started (every worker reconnects).

The coordinator injects at its tick, when it sees a mark passed. A stall of a fork worker is armed
before the run instead (`arm`): the worker itself stalls once the run's claims reach its mark. A
safe claim of a few hundred jobs drains in less than one tick, and a stall asked after the drain
never lands: lease-expiry's run then tried no completion after a lease ended (seen in CI).
After the run, :func:`fates` says what became of each fault's jobs, from the ledger's logs.
"""
from __future__ import annotations

import math
import os
import random
import signal
import time
from typing import Callable

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.engine.shared import STALL_ASKED, STALL_ENDED, STALLED, Shared, Slots
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import FaultPlan
from pg_claimcheck.verdict.ledger import LIVE, OUTCOME_NAMES, WorkerLog
from pg_claimcheck.verdict.observed import FaultEvent

FIRST_AT, LAST_AT = 0.08, 0.75
"""Faults land between these fractions of the jobs claimed."""
TERMINATE_LOOKS = 100
TERMINATE_LOOK_PAUSE_S = 0.002


def schedule(plan: FaultPlan) -> list[str]:
    """Fault kinds in the order they will be injected, interleaved so each kind meets a busy run."""
    queues = [["stall"] * plan.stalls, ["kill"] * plan.kills, ["terminate"] * plan.terminates,
              ["restart"] * plan.restarts]
    order = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop())
    return order


class FaultInjector:
    """Called by the driver's monitor loop; injects the next fault when progress passes its mark."""

    def __init__(self, plan: FaultPlan, jobs: int, run: RunContext, origin: float,
                 restart: Callable[[], None] | None, seed: int = 0) -> None:
        self.kinds = schedule(plan)  # a restart without a server of ours is reported as not injected
        n = len(self.kinds)
        self.marks = [math.ceil(jobs * (FIRST_AT + (LAST_AT - FIRST_AT) * i / max(n - 1, 1))) for i in range(n)]
        self.run, self.params, self.origin, self.restart = run, {"app_prefix": run.app_pattern()}, origin, restart
        self.rng = random.Random(seed)
        self.events: list[FaultEvent] = []
        self.killed: set[int] = set()
        self.skipped: list[str] = []
        self.forked = False
        """Fork workers (`arm` was called), whose stalls are read back from shared memory."""
        self.armed: dict[int, int] = {}
        """Fork workers armed to stall, and the mark each stalls at (`arm`), until they did."""
        self.asked: set[int] = set()
        """Fork workers asked at a tick to stall after their next claim (`inject`), until they did."""
        self.stalled: dict[int, int] = {}
        """The job each fork worker stalled on (`observe`)."""

    def due(self, claimed: int) -> bool:
        return bool(self.kinds) and claimed >= self.marks[0]

    def arm(self, workers: list[int], shared: Shared) -> None:
        """Arm each stall on a fork worker of its own before the run starts: it stalls after its
        first claim once the run's claims reach the stall's mark (Shared.stall_at). More stalls than
        workers: the rest are left to the tick, each asked of a worker whose armed stall has landed."""
        assert shared.stall is not None and shared.stall_at is not None
        self.forked = True
        victims = self.rng.sample(workers, len(workers))
        for i in [i for i, kind in enumerate(self.kinds) if kind == "stall"][:len(victims)][::-1]:
            victim, mark = victims.pop(), self.marks[i]
            del self.kinds[i], self.marks[i]
            shared.stall_at[victim], shared.stall[victim] = mark, STALL_ASKED
            self.armed[victim] = mark

    def observe(self, shared: Shared, last: bool = False) -> None:
        """Record the armed stalls that have landed (at the time the worker fell asleep); `last`:
        the run is over, and an armed stall that never landed was not injected."""
        assert shared.stall is not None and shared.stalled_job is not None and shared.stalled_at is not None
        for victim in list(self.asked):
            if shared.stall[victim] >= STALLED:  # its event was recorded when it was asked
                self.asked.discard(victim)
                self.stalled[victim] = shared.stalled_job[victim]
        for victim, mark in list(self.armed.items()):
            if shared.stall[victim] >= STALLED:
                del self.armed[victim]
                self.stalled[victim] = shared.stalled_job[victim]
                self.events.append(FaultEvent("stall", shared.stalled_at[victim] - self.origin, victim,
                                              f"slept past its lease after a claim, the run at {mark} claims"))
            elif last:
                del self.armed[victim]
                self.skipped.append("stall")
        self.events.sort(key=lambda e: e.at_s)

    def inject(self, alive: dict[int, int], stall: Slots, spawn: Callable[[], int]) -> None:
        """Inject the next fault. `alive` maps worker index to pid; `stall` is the workers' stall
        switches (pg_claimcheck.engine.shared: shared memory, or a library worker's flag files); `spawn`
        starts a replacement."""
        kind = self.kinds.pop(0)
        self.marks.pop(0)
        at = time.monotonic() - self.origin
        candidates = sorted(i for i in alive if i not in self.killed)
        if kind == "kill" and candidates:
            # Not a worker armed to stall, while another will do: its stall would never land.
            victim = self.rng.choice([i for i in candidates if i not in self.armed] or candidates)
            os.kill(alive[victim], signal.SIGKILL)
            self.killed.add(victim)
            replacement = spawn()
            self.events.append(FaultEvent("kill", at, victim, f"SIGKILL pid {alive[victim]}; w{replacement:02d} "
                                                              "started in its place"))
        elif kind == "stall" and candidates:
            idle = [i for i in candidates if stall[i] in (0, STALL_ENDED)] or candidates
            victim = self.rng.choice(idle)
            stall[victim] = STALL_ASKED
            if self.forked:  # its job is read from shared memory when it lands (`observe`)
                self.asked.add(victim)
            self.events.append(FaultEvent("stall", at, victim, "told to sleep past its lease after its next claim"))
        elif kind == "terminate":
            self._terminate(at, stall)
        elif kind == "restart" and self.restart is not None:
            started = time.monotonic()
            self.restart()
            took = time.monotonic() - started
            self.events.append(FaultEvent("restart", at, None, f"server restarted in {took:.2f}s"))
        else:
            self.skipped.append(kind)

    def _terminate(self, at: float, stall: Slots) -> None:
        """Terminate a worker backend caught inside a transaction; with short transactions that
        takes a few looks at pg_stat_activity, and after TERMINATE_LOOKS any worker backend will do.
        A stalled worker (asleep inside its transaction in lock mode, the first one a look finds)
        is left alone: each fault hits a worker that is working, or it tests nothing."""
        def asleep(worker: int) -> bool:  # or asked to sleep after its next claim; not one armed for later
            return stall[worker] == STALLED or (stall[worker] == STALL_ASKED and worker not in self.armed)

        def first_working(rows: list) -> tuple | None:
            return next((r for r in rows if not asleep(_worker_of(r[1]))), None)

        with self.run.connect("injector", in_schema=False) as conn:
            row, caught = None, True
            for _ in range(TERMINATE_LOOKS):
                if row := first_working(conn.execute(QUERIES["busy_worker_backends"], self.params).fetchall()):
                    break
                time.sleep(TERMINATE_LOOK_PAUSE_S)
            if row is None:
                row = first_working(conn.execute(QUERIES["any_worker_backend"], self.params).fetchall())
                caught = False
            if row is None:
                self.skipped.append("terminate")
                return
            pid, app, state = row
            conn.execute(QUERIES["terminate_backend"], {"pid": pid})
        worker = _worker_of(app)
        where = f"caught {state}" if caught else "between transactions"
        self.events.append(FaultEvent("terminate", at, worker, f"pg_terminate_backend({pid}), {where}"))


def _worker_of(application_name: str) -> int:
    """The worker number of a `claimcheck/<run>/wNN` connection."""
    return int(application_name.rsplit("/w", 1)[1])


def _held(logs: list[WorkerLog]) -> dict[int, list[int]]:
    held: dict[int, list[int]] = {}
    for log in logs:
        for i, job in enumerate(log.job):
            if log.outcome[i] == LIVE:
                held.setdefault(log.worker, []).append(job)
    return held


def _jobs_of(event: FaultEvent, held: dict[int, list[int]], stalled: dict[int, int]) -> list[int]:
    if event.kind == "kill":
        return held.get(event.worker, [])
    if event.kind == "stall" and event.worker in stalled:
        return [stalled[event.worker]]
    return []


def recovery_s(events: list[FaultEvent], kind: str) -> float | None:
    """The longest wait, from a fault to the next claim of a job it interrupted."""
    waits = [j["reclaimed_after_s"] for e in events if e.kind == kind for j in e.jobs
             if j["reclaimed_after_s"] is not None]
    return max(waits) if waits else None


def fates(events: list[FaultEvent], logs: list[WorkerLog], stalled: dict[int, int], origin: float,
          final_status_of: Callable[[set[int]], dict[int, tuple[str, int]]]) -> None:
    """Fill each fault's `jobs`: the claims it interrupted and every claim of those jobs.
    `final_status_of` reads (status, attempts) of the jobs it is given from the table."""
    held = _held(logs)
    wanted = {job for event in events for job in _jobs_of(event, held, stalled)}
    final_status = final_status_of(wanted) if wanted else {}
    by_job: dict[int, list[tuple[int, int, float, float, int]]] = {}
    for log in logs:
        for i, job in enumerate(log.job):
            if job in wanted:
                by_job.setdefault(job, []).append((log.worker, log.attempt[i], log.claimed_at[i],
                                                   log.ended_at[i], log.outcome[i]))
    for event in events:
        for job in _jobs_of(event, held, stalled):
            status, attempts = final_status.get(job, ("?", 0))
            later = [c - origin for w, a, c, e, o in by_job.get(job, []) if c - origin > event.at_s]
            event.jobs.append({
                "job": job, "final_status": status, "final_attempts": attempts,
                "reclaimed_after_s": round(min(later) - event.at_s, 3) if later else None,
                "claims": [{"worker": w, "attempt": a, "claimed_at_s": round(c - origin, 3),
                            "ended_at_s": None if math.isnan(e) else round(e - origin, 3),
                            "outcome": OUTCOME_NAMES[o]} for w, a, c, e, o in sorted(by_job.get(job, []),
                                                                                     key=lambda c: c[1])]})
