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
  and a completion that changed no row means the job can never be finished without one; a claim
  that returned more rows than it asked for is an over-claim (its worker sends that note the moment
  the claim committed, before recording its rows: a claim of a million rows is proven at once). Records
  arriving later cannot undo any of these, so a `check` may stop at once and still report exactly
  what it saw. With releases in play, a re-claim is judged only after the run, when every release
  (the reaper's included) is known.

When the first answer is no, the coordinator asks the server which worker is stuck in one
statement (pg_claimcheck.engine.sampler.stuck_backends).
"""
from __future__ import annotations

from pg_claimcheck.server.schema import job_words
from pg_claimcheck.verdict.ledger import ABANDONED, CLAIM_IS_COMPLETION, DONE, FAILED, STALE, WorkerLog


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

    def __init__(self, first_id: int, last_id: int, *, proves: bool, knows_keys: bool = True) -> None:
        self.proves = proves
        """Nothing releases a claim in this run, so a violation can be proven from a prefix of it."""
        self.knows_keys = knows_keys
        """Every key a job can have is known before the run (False: a rate run on a file's own tables, whose
        enqueue makes keys learnt only at the end, pg_claimcheck.engine.fedkeys): only then is an unseen key proof."""
        self.first_id = first_id
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
        if self.proves and log.over_claims and self.proof is None:  # only the first proof is kept
            at, rows, _ = log.over_claims[0]
            self._prove(f"worker w{log.worker:02d}'s claim returned {rows:,} rows, more than it asked for (an "
                        "over-claim)", at)
        for slot in range(first_new, len(log)):
            job = log.job[slot]
            if self.proves and not self.claimed.add(job):
                self._prove(f"{job_words(job, self.first_id)} was claimed a second time (worker w{log.worker:02d}, "
                            f"attempt {log.attempt[slot]})", log.claimed_at[slot])
            elif self.proves and self.knows_keys and not self.claimed.seeded(job):
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
            self._prove(f"the completion of {job_words(log.job[slot], self.first_id)} by worker w{log.worker:02d} changed no row, "
                        "and nothing had released its claim", log.ended_at[slot])

    def _prove(self, what: str, at: float) -> None:
        if self.proof is None:
            self.proof, self.proof_at = what, at

