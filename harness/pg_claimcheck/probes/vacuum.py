"""Dead tuples kept by held transactions: seed 003's VACUUM (VERBOSE) experiment, per holder.

For each way a session can sit open (nothing; a claim idle in transaction after its write; a
read-only REPEATABLE READ transaction after its first read; a read-only READ COMMITTED
transaction idle between statements), other workers process N jobs while it is open, then
`VACUUM (VERBOSE) jobs` says how many dead row versions it removed and how many it had to keep;
the holder ends and VACUUM runs again. A transaction holds the horizon back through its
snapshot (`backend_xmin`) or its own transaction id (`backend_xid`, once it has written): the
table shows both. The archive step (delete finished jobs in batches) runs last.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import psycopg
from psycopg import IsolationLevel, sql

from pg_claimcheck.contract.strategy import Strategy, sample_params
from pg_claimcheck.errors import ServerError
from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.probes._verbose import VacuumFigures, parse_vacuum_verbose
from pg_claimcheck.probes._work import LEASE_SECONDS, TableStats, connect, flush_stats, process_jobs, table_stats
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import build_jobs_table

HOLDERS: dict[str, str] = {
    "none": "no transaction held open (baseline)",
    "claim": "a claim idle in transaction after its write (lock-while-working)",
    "repeatable-read": "read-only REPEATABLE READ, idle after its first read",
    "read-committed": "read-only READ COMMITTED, idle in transaction between statements",
}
HOLDS_HORIZON = ("claim", "repeatable-read")  # the holders that keep tuples by design
SPARE_JOBS = 10  # queued beyond N: the held claim takes one, and workers must still find N
ARCHIVE_TAIL_JOBS = 100  # left queued at the end of the table, as in a live queue: see archive()

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Horizon:
    """How far back one session holds the xmin horizon, in transactions (None: holds nothing)."""

    xmin_age: int | None
    xid_age: int | None
    state: str | None

    def as_dict(self) -> dict:
        return {"backend_xmin_age": self.xmin_age, "backend_xid_age": self.xid_age, "state": self.state}


@dataclass(frozen=True)
class Outside:
    """Holders outside this probe that can keep tuples too (shared servers)."""

    sessions: int
    oldest_age: int | None
    prepared: int
    slots: int
    cutoff_predates_workload: bool = False
    """VACUUM's own removable cutoff was older than the workload's end while nothing of ours held
    it: someone else did, even if pg_stat_activity no longer shows them (they come and go)."""

    @property
    def any(self) -> bool:
        return bool(self.sessions or self.prepared or self.slots or self.cutoff_predates_workload)

    def as_dict(self) -> dict:
        return {"sessions": self.sessions, "oldest_age": self.oldest_age, "prepared_xacts": self.prepared,
                "replication_slots": self.slots, "cutoff_predates_workload": self.cutoff_predates_workload}


@dataclass(frozen=True)
class VacuumRow:
    """One holder mode: the workload, VACUUM while held, VACUUM after release."""

    holder: str
    jobs_processed: int
    horizon: Horizon
    """The holder's horizon just before the first VACUUM."""
    outside: Outside
    dead_before: TableStats
    """n_dead_tup and size after the workload, before any VACUUM."""
    held: VacuumFigures
    released: VacuumFigures
    dead_after: TableStats
    """After the second VACUUM."""
    outside_after: Outside
    """Other holders just before the second VACUUM: what it could not remove may be theirs."""

    def as_dict(self) -> dict:
        return {"holder": self.holder, "description": HOLDERS[self.holder], "jobs_processed": self.jobs_processed,
                "holder_horizon": self.horizon.as_dict(), "outside_holders": self.outside.as_dict(),
                "before_vacuum": self.dead_before.as_dict(), "vacuum_while_held": self.held.as_dict(),
                "vacuum_after_release": self.released.as_dict(), "after_vacuum": self.dead_after.as_dict(),
                "outside_holders_after_release": self.outside_after.as_dict()}


@dataclass(frozen=True)
class ArchiveResult:
    """Seed 003's archive step: finished jobs deleted in batches, then VACUUM."""

    batch: int
    batches: int
    deleted: int
    before: TableStats
    after_delete: TableStats
    after_vacuum: TableStats
    vacuum: VacuumFigures

    def as_dict(self) -> dict:
        return {"batch": self.batch, "batches": self.batches, "deleted": self.deleted,
                "before": self.before.as_dict(), "after_delete": self.after_delete.as_dict(),
                "after_vacuum": self.after_vacuum.as_dict(), "vacuum": self.vacuum.as_dict()}


@dataclass
class VerboseCapture:
    """Collects the INFO notices VACUUM (VERBOSE) sends, primary text and detail together."""

    messages: list[str] = field(default_factory=list)

    def __call__(self, diag: psycopg.errors.Diagnostic) -> None:
        self.messages.append("\n".join(part for part in (diag.message_primary, diag.message_detail) if part))


def vacuum_of(schema: str, query: str) -> sql.Composed:
    """The VACUUM `query` of the run's `jobs`, named with its schema (VACUUM runs alone, with no search path
    set in its message through a pooler)."""
    return sql.SQL(PROBE_QUERIES[query]).format(jobs=sql.Identifier(schema, "jobs"))


def vacuum_verbose(conn: psycopg.Connection, schema: str) -> VacuumFigures:
    """`VACUUM (VERBOSE) jobs` of the run's `schema` on an autocommit connection, read from its notices."""
    capture = VerboseCapture()
    conn.add_notice_handler(capture)
    try:
        conn.execute(vacuum_of(schema, "vacuum_verbose"))
    finally:
        conn.remove_notice_handler(capture)
    figures = parse_vacuum_verbose(capture.messages)
    if figures is None:  # a server whose wording we do not know: say so rather than print zeros
        raise ServerError(f"PostgreSQL {conn.info.server_version}: VACUUM (VERBOSE) sent no 'tuples:' line we can "
                          "read, so there are no figures to show; please report it with these messages: "
                          + " | ".join(capture.messages)[:500])
    return figures


def horizon_of(conn: psycopg.Connection, pid: int | None) -> Horizon:
    if pid is None:
        return Horizon(None, None, None)
    row = conn.execute(PROBE_QUERIES["holder_horizon"], {"pid": pid}).fetchone()
    return Horizon(*row) if row else Horizon(None, None, None)


def xid_marker(conn: psycopg.Connection) -> str:
    """A transaction id taken as the workload ends: any other session whose horizon is older may
    keep some of the row versions the workload left dead."""
    return conn.execute(PROBE_QUERIES["xid_marker"]).fetchone()[0]


def outside_holders(conn: psycopg.Connection, our_pids: list[int], marker: str) -> Outside:
    return Outside(*conn.execute(PROBE_QUERIES["other_horizons"], {"pids": our_pids, "marker": marker}).fetchone())


def vacuum_checked(conn: psycopg.Connection, schema: str, outside: Outside, marker: str, ours_hold: bool
                   ) -> tuple[VacuumFigures, Outside]:
    """VACUUM (VERBOSE), and whether its cutoff shows a holder we did not see.

    The marker's age is read just before VACUUM, so a cutoff older than that age is older than
    the marker (other transactions in between only make the test more cautious)."""
    marker_age = conn.execute(PROBE_QUERIES["marker_age"], {"marker": marker}).fetchone()[0]
    figures = vacuum_verbose(conn, schema)
    if not ours_hold and figures.cutoff_age_xids is not None and figures.cutoff_age_xids > marker_age:
        outside = replace(outside, cutoff_predates_workload=True)
    return figures, outside


@contextmanager
def held_open(holder: str, conn: psycopg.Connection, strategy: Strategy) -> Iterator[int | None]:
    """Open the holder's transaction on `conn` (not autocommit); yield its pid; commit on exit."""
    if holder == "none":
        yield None
        return
    conn.autocommit = False
    if holder == "claim":
        claimed = claim_in_open_transaction(conn, strategy)
        assert claimed, "the held claim found no job"
    else:
        conn.isolation_level = (IsolationLevel.REPEATABLE_READ if holder == "repeatable-read"
                                else IsolationLevel.READ_COMMITTED)
        conn.execute(PROBE_QUERIES["read_one"]).fetchone()
    try:
        yield conn.info.backend_pid
    except BaseException:
        if not conn.closed:  # end it so the error that brought us here is the one reported
            conn.rollback()
        raise
    conn.commit()


def claim_in_open_transaction(conn: psycopg.Connection, strategy: Strategy) -> int:
    """The seed's case: one claim written and left uncommitted (a worker 'working' inside it)."""
    cur = conn.execute(strategy.statements["claim"],
                       sample_params(strategy, "claim", worker="holder", batch=1, lease_seconds=LEASE_SECONDS))
    return len(cur.fetchall())


def run_holder(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
               holder: str, jobs: int) -> VacuumRow:
    """One row of the table, on a fresh `jobs` table of N + spare queued jobs."""
    build_jobs_table(coordinator, run.schema, jobs + SPARE_JOBS)
    coordinator.execute(PROBE_QUERIES["autovacuum_off"])
    with ExitStack() as stack:
        worker = connect(run, "vacuum-worker", stack, worker=True)
        holding = connect(run, "vacuum-holder", stack)
        with held_open(holder, holding, strategy) as pid:
            processed = process_jobs(worker, strategy, jobs, worker="vacuum-worker")
            marker = xid_marker(coordinator)
            flush_stats(worker)
            horizon = horizon_of(coordinator, pid)
            outside = outside_holders(coordinator, [worker.info.backend_pid, holding.info.backend_pid], marker)
            before = table_stats(coordinator)
            held, outside = vacuum_checked(coordinator, run.schema, outside, marker, ours_hold=holder in HOLDS_HORIZON)
        flush_stats(holding)
        outside_after = outside_holders(coordinator, [worker.info.backend_pid, holding.info.backend_pid], marker)
        released, outside_after = vacuum_checked(coordinator, run.schema, outside_after, marker, ours_hold=False)
        after = table_stats(coordinator)
    return VacuumRow(holder, processed, horizon, outside, before, held, released, after, outside_after)


def archive(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
            jobs: int, batch: int) -> ArchiveResult:
    """N jobs processed and vacuumed, then deleted in batches, then VACUUM.

    A tail of still-queued jobs sits at the end of the table, as in a live queue, so VACUUM can
    make the space reusable but cannot truncate the file: the size stays, n_dead_tup drops.
    """
    build_jobs_table(coordinator, run.schema, jobs + ARCHIVE_TAIL_JOBS)
    coordinator.execute(PROBE_QUERIES["autovacuum_off"])
    with ExitStack() as stack:
        worker = connect(run, "archive-worker", stack, worker=True)
        process_jobs(worker, strategy, jobs, worker="archive-worker")
        flush_stats(worker)
        coordinator.execute(vacuum_of(run.schema, "vacuum_plain"))
        before = table_stats(coordinator)
        batches = deleted = 0
        while True:
            count = worker.execute(PROBE_QUERIES["archive_batch"], {"batch": batch}).rowcount
            if count <= 0:
                break
            batches, deleted = batches + 1, deleted + count
        flush_stats(worker)
    after_delete = table_stats(coordinator)
    figures = vacuum_verbose(coordinator, run.schema)
    after_vacuum = table_stats(coordinator)
    return ArchiveResult(batch, batches, deleted, before, after_delete, after_vacuum, figures)


def run_vacuum_probe(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
                     jobs: int, holders: list[str], progress: Progress = lambda _: None) -> list[VacuumRow]:
    rows = []
    for holder in holders:
        progress(f"holder {holder}: processing {jobs:,} jobs")
        rows.append(run_holder(coordinator, run, strategy, holder, jobs))
    return rows
