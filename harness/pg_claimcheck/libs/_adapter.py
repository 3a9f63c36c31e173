"""The interface every library adapter implements, and the recording task's side of it.

An adapter is one module in `pg_claimcheck.libs` with a module-level `ADAPTER`, an instance of a
:class:`LibraryAdapter` subclass. It does four things, each through the library's own public API
(never our SQL): install the library's schema with its own installer, enqueue N jobs, run the
library's OWN worker loop with our recording task, and read the library's table afterwards (what
became of each job, in the library's words). For `--pgbench` it also writes one cycle of its
worker loop as a pgbench script from the library's own statements (:meth:`LibraryAdapter.pgbench_cycle`).
Adding a library is one more such module and a line in `pg_claimcheck.libs.ADAPTERS`.

The recording task calls :meth:`Recorder.execute` once per execution. The recorder appends one
line when the execution starts and one when it ends to the worker's own file with a single
`write(2)` each (O_APPEND), so a SIGKILL loses at most the end of the execution it interrupted,
never a start: the coordinator reads those files after the run and feeds them to the ledger.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import psycopg

from pg_claimcheck.contract.dialect import rows_as_cte
from pg_claimcheck.engine.judge import Delivery
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs._sql import LIB_QUERIES
from pg_claimcheck.settings import WorkTime
from pg_claimcheck.verdict.result import TableOutcome

HELLO = "H"
"""A Python worker's hello line in its records file (`H <pid>`), which pg_claimcheck.libs.records skips."""
STOP_GRACE_S = 10.0
"""After SIGTERM (the library's graceful stop), how long the coordinator waits before it kills a worker."""
WORKER_GRACE_S = STOP_GRACE_S - 2
"""How long an external worker gives its library's graceful stop before it exits by itself (exit 4):
less than the coordinator's wait, so it leaves on its own before the SIGKILL."""


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process is told (as JSON on its stdin: the DSN may hold a password, and a
    command line is anyone's to read in the process list)."""

    library: str
    dsn: str
    """The run's own database, with `application_name=claimcheck/<run>/wNN`."""
    worker: int
    records: str
    """The file this worker appends its executions to."""
    stall_flag: str
    """When this file exists, the next execution stalls (blocks its event loop) for `stall_s`."""
    work_ms: str
    stall_s: float
    faults: bool
    """Run with the short lease / heartbeat settings the fault kinds need to be seen in a short run."""
    idle: str = ""
    """`lib NAME --idle` (pg_claimcheck.libs.idle_probe), on an empty queue: `defaults` runs the library's worker
    with its documented defaults, none of the adapter's own knobs (poll intervals, heartbeats, maintenance);
    `suspendable` with the settings of LibraryAdapter.suspendable. Empty: a run with jobs."""


class Recorder:
    """Per worker process: records each execution of the recording task."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.work = WorkTime.parse(config.work_ms)
        self.rng = random.Random(config.worker)
        self.fd = os.open(config.records, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def _line(self, *fields: object) -> None:
        os.write(self.fd, ("\t".join(str(f) for f in fields) + "\n").encode())

    def hello(self) -> None:
        """The worker's first line, once its library is imported and its loop about to start: until a
        worker says it, the coordinator counts its start-up as no stall (pg_claimcheck.libs.runner)."""
        self._line(HELLO, os.getpid())

    async def execute(self, key: int, job_id: object, attempt: int | None, claimed_at: float | None = None) -> None:
        """One execution of job `key` (our dense key, carried in the payload), `job_id` and
        `attempt` as the library reports them, `claimed_at` the library's own time of the claim
        (epoch seconds, the server's clock) when it gives one: a library that fetches a batch
        starts some jobs well after it claimed them. Records the start, works (or stalls),
        records the end."""
        started = time.monotonic()
        waited = max(time.time() - claimed_at, 0.0) if claimed_at else 0.0
        self._line("S", key, job_id, "" if attempt is None else attempt, f"{started:.6f}", f"{waited:.6f}")
        try:
            os.unlink(self.config.stall_flag)
            stalled = True
        except FileNotFoundError:
            stalled = False
        if stalled:
            # A stall blocks the event loop, as a CPU-bound or blocking call inside an async task
            # does: the library's heartbeat stops with it, which is what its lease guards against.
            self._line("P", key, f"{time.monotonic():.6f}")
            time.sleep(self.config.stall_s)
        else:
            pause = self.work.draw_s(self.rng)
            if pause > 0:
                await asyncio.sleep(pause)
        self._line("E", key, f"{time.monotonic():.6f}")


COMMAND_WORKER_ENV = "CLAIMCHECK_WORKER"
"""A worker that is the library's own command (`manage.py db_worker`, `taskiq worker`), not our _worker process:
its WorkerConfig as JSON in this environment variable, for the recording task (`command_recorder`). The
environment, not the command line: the DSN may hold a password."""
_command_recorders: dict[int, Recorder] = {}


def command_recorder() -> Recorder:
    """In a library's own worker command: this process's Recorder, made at its first execution from
    COMMAND_WORKER_ENV (a command that forks its workers, django-q2's cluster or taskiq's, has one per process)."""
    pid = os.getpid()
    if pid not in _command_recorders:
        _command_recorders[pid] = Recorder(WorkerConfig(**json.loads(os.environ[COMMAND_WORKER_ENV])))
    return _command_recorders[pid]


def spawn_command(argv: list[str], env: dict[str, str], stderr) -> subprocess.Popen:
    """A worker that is the library's own command (`python -m django db_worker`, `python -m taskiq worker`), given its
    WorkerConfig in `env` (COMMAND_WORKER_ENV): in a process group of its own, as LibraryAdapter.spawn's."""
    from pg_claimcheck.server import children

    return children.start([sys.executable, "-m", *argv], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=stderr)


def say_hello() -> None:
    """In a library's own worker command, once its process has loaded the library: says it is up (a file beside its
    records, `CommandWorker.said_hello`). A no-op in any other process."""
    if COMMAND_WORKER_ENV in os.environ:
        Path(json.loads(os.environ[COMMAND_WORKER_ENV])["records"] + HELLO_SUFFIX).touch()


HELLO_SUFFIX = ".up"


def command_env(config: WorkerConfig, **extra: str) -> dict[str, str]:
    """The environment of a worker command: ours, its config (COMMAND_WORKER_ENV), and `extra`."""
    return dict(os.environ, **{COMMAND_WORKER_ENV: json.dumps(asdict(config))}, **extra)


@dataclass(frozen=True)
class LibraryCycle:
    """One cycle of a library's worker loop as a pgbench script (`claimcheck lib --pgbench`): the
    statements one worker sends to take a batch and finish it, in the library's own words."""

    script: str
    """pgbench's script language. Each statement is the library's own text (as the installed library
    gives it) with its parameters replaced by the values the adapter's workers use; what is one
    transaction in the library is one in the script."""
    jobs: int
    """Jobs one cycle takes at most (the library's batch): each client runs ceil(jobs / (clients x
    this)) cycles, since pgbench cannot stop on an empty queue."""
    statements: str
    """Which statements the script runs and where they come from, in words (the JSON's `pgbench`)."""
    per_client: dict[str, str] = field(default_factory=dict)
    """Variable -> a statement of the library run once per client before pgbench starts (a worker's
    registration); the variable holds their first columns as an array literal, client c's value
    being element c + 1."""


def fetch_then_complete(fetch: str, gather: str, complete: str, work_us: int, jobs: int,
                        statements: str) -> LibraryCycle:
    """A pgbench cycle of a worker that fetches (one statement whose rows `gather` reads into pgbench
    variables from `cc_rows`, `cc_n` their count), works, then completes (one statement) when it got any."""
    lines = [rows_as_cte(fetch, "cc_rows", gather), "\\gset", "\\if :cc_n > 0"]
    if work_us:
        lines.append(f"\\sleep {work_us} us")
    lines += [complete.strip() + ";", "\\endif"]
    return LibraryCycle(script="\n".join(lines) + "\n", jobs=jobs, statements=statements)


def pgbench_literal(quoted: str) -> str:
    """A quoted name or string (psycopg.sql's spelling) with its colons spelled `\\003A` (PostgreSQL's U& form):
    pgbench takes `:name` for one of its variables even inside quotes, and libraries' names have colons
    (saq's channel `saq:<queue>`, huey's revoke keys `rt:<task>`)."""
    if "\\" in quoted:  # U& reads a backslash as its escape; the names we spell have none
        raise ValueError(f"cannot spell {quoted} for pgbench")
    return "U&" + quoted.replace(":", "\\003A")


class LibraryAdapter:
    """One queue library under the ledger. Subclasses set the class attributes and implement
    the methods; everything runs against the run's own database (`dsn`)."""

    name: ClassVar[str]
    """The name users type: `claimcheck lib NAME`."""
    distribution: ClassVar[str]
    """The package on PyPI (its installed version is shown with every result)."""
    promise: ClassVar[str]
    """What the library promises about delivery, in a sentence, from its docs."""
    docs: ClassVar[str]
    """Where that promise is written."""
    delivery: ClassVar[Delivery] = "at-least-once"
    """The promise as the verdict holds it (pg_claimcheck.engine.judge.held_to_promise): at-most-once forbids
    every second execution and allows a job lost to a failure; at-least-once the other way round."""
    lease_s: ClassVar[float]
    """Under --faults: the lease / heartbeat staleness the adapter configures, in seconds."""
    stall_release_s: ClassVar[float]
    """Under --faults: how long after a stall began the library may, at the earliest, take the
    job for abandoned (its lease minus one heartbeat interval). A re-execution earlier than that
    while the stalled one still runs is a double execution, later it is a redelivery."""

    claim_lease_s: ClassVar[float] = 0.0
    """Under --faults, for a library whose lease runs from the claim rather than from its last
    heartbeat (delayed_job's `locked_at + max_run_time`), or from the claim until a first heartbeat is
    written (pgqueuer): a stalled execution is released at its claim plus this, when that is earlier
    than the stall's start plus `stall_release_s` (0: no such lease)."""

    recovery_s: ClassVar[float] = 0.0
    """Under --faults, how long the library's own recovery may take to give a failed worker's job back beyond its
    lease (sidequest's stale-job routine is a cron of whole minutes): a run waiting for it counts as stalled only
    this much later."""

    suspendable: ClassVar[str | None] = None
    """The library's settings that come nearest to an idle worker sending nothing more often than every 15
    minutes, by its source, so a compute suspending after 10 could (`lib NAME --idle W --idle-setting suspendable` runs
    them, when the adapter's `work` honours `WorkerConfig.idle`); in words, with the source. None: none known."""

    completion_lag_s: ClassVar[float] = 0.1
    """How long after the task returns the library may still not have recorded the job finished
    (its completion statement's round trip, or a completion buffer): a worker failure within it
    may make the job run again."""

    @property
    def sql_name(self) -> str:
        """The prefix of the adapter's statements in sql/libs.sql (a name there has no hyphen)."""
        return self.name.replace("-", "_")

    def prepare(self) -> None:
        """When the adapter is loaded, before anything starts: whatever the library needs besides
        its Python package (a UsageError saying what is missing). Nothing, for a Python library."""

    def install(self, dsn: str) -> None:
        """Create the library's schema with its own installer."""
        raise NotImplementedError

    def enqueue(self, dsn: str, keys: range) -> list:
        """Enqueue one job per key through the library's public API (the key travels in the
        payload); return the library's job ids, in the order of `keys`."""
        raise NotImplementedError

    feeds: ClassVar[bool] = False
    """Does it implement :meth:`feeder` (`lib NAME --rate`)?"""

    def fed(self, count: int) -> None:
        """`lib --rate`: the producer has committed `count` jobs so far (told before each `outcome`), for an
        adapter whose table forgets finished jobs; the producer runs in a process of its own."""

    def feeder(self, dsn: str) -> contextlib.AbstractAsyncContextManager:
        """`lib NAME --rate` (pg_claimcheck.libs.feed): an async context manager whose value is an async
        `defer(key)` that enqueues one job for `key` through the library's public API, committed when it
        returns, on connections kept open while the context lasts."""
        raise UsageError(f"claimcheck lib {self.name} --rate: feeding {self.name} while it works is not "
                         "implemented; run it without --rate")

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        """Run the library's own worker loop with a task that calls `recorder.execute`, until `stop` is set."""
        raise NotImplementedError

    def recover(self, dsn: str, dead: dict[int, Path]) -> list[int]:
        """The library's documented way to give back jobs of crashed workers, when it wants the
        user to run one (procrastinate's stalled jobs, graphile-worker's force_unlock_workers);
        `dead` maps each worker whose process has died so far to its records file. Returns the
        keys it gave back."""
        return []

    def outcome(self, conn: psycopg.Connection) -> TableOutcome:
        """The library's table after (or during) the run, in our terms: the `<name>_outcome` query
        of sql/libs.sql, with :meth:`outcome_params`."""
        row = conn.execute(LIB_QUERIES[f"{self.sql_name}_outcome"], self.outcome_params()).fetchone()
        assert row is not None, "an aggregate query returns one row"
        done, queued, running, failed, max_attempts = row
        return TableOutcome(done=done, queued=queued, running=running, failed=failed, max_attempts=max_attempts)

    def outcome_params(self) -> dict | None:
        """The parameters of the `<name>_outcome` query (None: it takes none)."""
        return None

    def unfinished(self, conn: psycopg.Connection, limit: int) -> list[dict]:
        """Jobs neither done nor failed in the library's table, in its own words (at most `limit`)."""
        rows = conn.execute(LIB_QUERIES[f"{self.sql_name}_unfinished"], {"limit": limit}).fetchall()
        return [{"job": key, "library_id": str(job_id), "status": status, "attempts": attempts, "owner": str(owner)}
                for key, job_id, status, attempts, owner in rows]

    def final_status(self, conn: psycopg.Connection, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        """For the fault report: of the keys given (key -> the library's job id), key -> (status in
        the library's own words, its attempt count): the `<name>_status` query of sql/libs.sql, by
        our keys (the jobs' payload). An adapter whose query takes the library's ids overrides it."""
        rows = conn.execute(LIB_QUERIES[f"{self.sql_name}_status"], {"keys": list(ids)}).fetchall()
        return {key: (status, attempts) for key, status, attempts in rows}

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One cycle of the library's worker loop as a pgbench script, with the statements taken
        from the installed library wherever it exposes them and the parameters `work` runs it
        with; `work_us` is each task's work time (a `\\sleep` where the library's tasks run).
        Raises :class:`UsageError` when the script cannot be built (nothing has started then)."""
        raise UsageError(f"claimcheck lib {self.name} --pgbench: there is no pgbench script for {self.name}; "
                         "run it without --pgbench")

    def require_copied_from(self, copied_from: str, where: str) -> None:
        """For a pgbench cycle whose statements are copies of SQL the library keeps inline (`where`), made from
        its version `copied_from`: a UsageError when another version is installed, whose SQL may differ."""
        lib, installed = self.distribution, self.version()
        if installed != copied_from:
            raise UsageError(f"claimcheck lib {self.name} --pgbench runs {lib}'s SQL as copied from {lib} {copied_from} "
                             f"({lib} keeps it inline in {where}), and {lib} {installed} is installed: its SQL may "
                             f"differ. Run it without --pgbench, or with {lib}=={copied_from}")

    def said_hello(self, records: Path) -> bool:
        """Has the worker writing `records` said it is up? A Python worker's hello is its first line
        (Recorder.hello); an external worker's, its protocol's hello."""
        try:
            with open(records, "rb") as lines:
                return lines.readline().startswith(HELLO.encode() + b"\t")
        except FileNotFoundError:
            return False

    def has_pgbench_cycle(self) -> bool:
        """Is a pgbench cycle written for it (`--pgbench`)?"""
        return type(self).pgbench_cycle is not LibraryAdapter.pgbench_cycle

    def reset(self, conn: psycopg.Connection) -> None:
        """Empty the library's tables (the `<name>_reset` statement of sql/libs.sql), so the pgbench
        pass starts from N freshly enqueued jobs in the run's own database."""
        conn.execute(LIB_QUERIES[f"{self.sql_name}_reset"])

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.distribution)

    def spawn(self, config: WorkerConfig, stderr) -> subprocess.Popen:
        """Start one worker process running the library's loop (`python -m pg_claimcheck.libs._worker`,
        which appends to `config.records` itself); its stderr goes to `stderr`. The config, DSN
        and password with it, goes down a pipe on its stdin, never on its command line. Called inside
        interrupts.deferred(), as children.start."""
        from pg_claimcheck.server import children

        # A process group of its own (children.start): what the library starts (chancy's executor starts a
        # multiprocessing manager) outlives a SIGKILLed worker, and children.stop kills it with its group.
        # The coordinator stops its workers itself (SIGTERM), so Ctrl-C need not reach them.
        popen = children.start([sys.executable, "-m", "pg_claimcheck.libs._worker"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr)
        assert popen.stdin is not None  # stdin=PIPE
        try:  # a few hundred bytes: the pipe's buffer takes them whether or not the worker reads yet
            popen.stdin.write(json.dumps(asdict(config)).encode())
            popen.stdin.close()
        except BrokenPipeError:  # it died at once: the coordinator sees the exit and its stderr
            pass
        return popen

    def worker_records(self, directory: Path) -> tuple[dict[int, str], str]:
        """After the run: every worker's records in the recording task's lines (worker -> text), and
        the library version they ran."""
        from pg_claimcheck.libs.records import read_worker_files

        return read_worker_files(directory), self.version()


class NoLease(LibraryAdapter):
    """A library that never takes a running job from a live worker (huey, DBOS): no lease or heartbeat to expire."""

    lease_s = 1.0
    """No lease: only the base of a stall's length under --faults (FaultPlan.stall_factor x this)."""
    stall_release_s = 3600.0
    """Longer than any run: a stall releases nothing."""


class ForgetsJobs(LibraryAdapter):
    """A library whose table forgets jobs (huey deletes a task when a consumer takes it, graphile-worker and
    delayed_job a job when it succeeds): the adapter counts the jobs enqueued, seeded and then fed
    (`lib --rate`), which its `<name>_outcome` query takes as `enqueued`. Its `enqueue` calls `seeded_now`."""

    def __init__(self) -> None:
        self.seeded = 0
        """Jobs enqueued before the workers started."""
        self.produced = 0
        """`lib --rate`: jobs its producer committed so far (LibraryAdapter.fed)."""

    def seeded_now(self, count: int) -> None:
        """A run's jobs were enqueued before its workers: the count starts again from them. An adapter
        serves several runs (a bench, the tests' session fixture), and a fed run's `produced` must
        not count in the next run's table (a healthy graphile-worker run read 70 done for 60 jobs)."""
        self.seeded, self.produced = count, 0

    @property
    def enqueued(self) -> int:
        return self.seeded + self.produced

    def fed(self, count: int) -> None:
        self.produced = count

    def outcome_params(self) -> dict | None:
        return {"enqueued": self.enqueued}


class CommandWorker(LibraryAdapter):
    """A library whose workers are its own command (spawn_command), which says when it is up (say_hello): Django
    and the library loading in eight processes at once on a loaded machine take longer than the supervisor's
    stall limit, and a start-up is not a stall (pg_claimcheck.libs.runner counts a hello as activity)."""

    says_hello = True

    def said_hello(self, records: Path) -> bool:
        return Path(str(records) + HELLO_SUFFIX).exists()
