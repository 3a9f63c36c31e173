"""What the coordinator learns from the workers' records while a run goes on.

Two questions, answered from the records each worker already streams (no query, no extra
message), so the coordinator can end a run that has already decided its verdict:

- **Is the queue making progress?** A job finished for the first time (a completion that changed
  the row, or a claim that is itself the completion) or a failure that requeued a job (bounded by
  max_attempts) is progress. Workers that keep claiming while nothing progresses are running a
  claim that hands out jobs it does not take, or a `complete` that never matches: the driver ends
  such a run (`no-progress`) instead of letting it go on forever.
- **Is a violation already proven?** Only where nothing can release a claim (no reaper, no
  failures, no faults): there, by the ledger's rules (docs/contracts.md, section 2), a second
  committed claim of a job is a double claim, a claimed key that was never seeded is unexpected,
  and a completion that changed no row means the job can never be finished without one. Records
  arriving later cannot undo any of these, so a `check` may stop at once and still report exactly
  what it saw. With releases in play, a re-claim is judged only after the run, when every release
  (the reaper's included) is known.

A third comes from the sampler's view of `pg_stat_activity`, when the first answer is no: **is a
worker stuck in one statement?** (a `pg_sleep`, a lock never released, a `complete` that never
returns). :func:`stuck_backends` names them, so a run that ends for want of progress says which
worker held it up, its backend and what it waits on.
"""
from __future__ import annotations

from dataclasses import dataclass

from claimcheck.verdict.ledger import ABANDONED, CLAIM_IS_COMPLETION, DONE, FAILED, STALE, WorkerLog


class _Marks:
    """A set of job keys: one byte per seeded id, a plain set for anything else."""

    def __init__(self, first_id: int, last_id: int) -> None:
        self.first, self.bytes, self.others = first_id, bytearray(max(last_id - first_id + 1, 0)), set()

    def add(self, job) -> bool:
        """Mark `job`; False if it was marked already."""
        slot = job - self.first if isinstance(job, int) else -1
        if 0 <= slot < len(self.bytes):
            if self.bytes[slot]:
                return False
            self.bytes[slot] = 1
            return True
        if job in self.others:
            return False
        self.others.add(job)
        return True

    def seeded(self, job) -> bool:
        return isinstance(job, int) and 0 <= job - self.first < len(self.bytes)


class RunWatch:
    """Fed with each merged delta of a worker's log; read by the driver once per monitor tick."""

    def __init__(self, first_id: int, last_id: int, *, proves: bool) -> None:
        self.proves = proves
        """Nothing releases a claim in this run, so a violation can be proven from a prefix of it."""
        self.claimed = _Marks(first_id, last_id)
        self.finished = _Marks(first_id, last_id)
        self.progress = 0
        """Jobs finished for the first time, plus failures (each moves a job towards max_attempts)."""
        self.proof: str | None = None
        """The first proven violation, in words, or None."""
        self.proof_at: float | None = None
        """When its claim committed (or its completion ended), monotonic clock."""

    def see(self, log: WorkerLog, first_new: int, ended: list[int]) -> None:
        """Records `first_new:` of `log` just arrived, and the endings of its older slots `ended`."""
        for slot in range(first_new, len(log)):
            job = log.job[slot]
            if self.proves and not self.claimed.add(job):
                self._prove(f"job {job} was claimed a second time (worker w{log.worker:02d}, "
                            f"attempt {log.attempt[slot]})", log.claimed_at[slot])
            elif self.proves and not self.claimed.seeded(job):
                self._prove(f"the claim returned key {job}, which was never seeded", log.claimed_at[slot])
            self._ending(log, slot)
        for slot in ended:
            if slot < first_new:
                self._ending(log, slot)

    def _ending(self, log: WorkerLog, slot: int) -> None:
        how = log.outcome[slot]
        if how in (DONE, CLAIM_IS_COMPLETION):
            self.progress += self.finished.add(log.job[slot])
        elif how == FAILED:
            self.progress += 1
        elif how in (STALE, ABANDONED) and self.proves:
            self._prove(f"the completion of job {log.job[slot]} by worker w{log.worker:02d} changed no row, "
                        "and nothing had released its claim", log.ended_at[slot])

    def _prove(self, what: str, at: float) -> None:
        if self.proof is None:
            self.proof, self.proof_at = what, at


@dataclass(frozen=True)
class StuckBackend:
    """A worker's backend that has been in one state (a statement, or a transaction left open) for long."""

    worker: str
    pid: int
    state: str
    wait: str | None
    for_s: float
    query: str

    def __str__(self) -> str:
        wait = f"wait event {self.wait}" if self.wait else "no wait event (running)"
        return (f"worker {self.worker} (backend pid {self.pid}) has been {self.state} for {self.for_s:.0f}s, "
                f"{wait}: {' '.join(self.query.split())[:60]}")


def stuck_backends(sample: list[tuple], at_least_s: float) -> list[StuckBackend]:
    """The workers' backends of a sampler snapshot (rows of sample_activity) in one state for at
    least `at_least_s`, longest first."""
    found = [StuckBackend(worker=app.rsplit("/", 1)[-1], pid=pid, state=state or "?",
                          wait=f"{wait_type}/{wait_event}" if wait_type else None, for_s=for_s or 0.0,
                          query=query or "")
             for wait_type, wait_event, app, pid, state, for_s, query in sample
             if for_s is not None and for_s >= at_least_s]
    return sorted(found, key=lambda s: -s.for_s)
