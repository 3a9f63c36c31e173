"""Planner conditions a real queue reaches, under which `check` runs the claim again (docs/plans.md).

A claim is safe or not in the plan the server gives it, and that plan depends on what the
planner believes about the tables and on the planner's settings. `check`'s own run sees one
plan: the tables as seeded and freshly analyzed. Each condition here builds the tables another
way, or sets planner settings in the workers' sessions only (never in the claim's text: see
`under`), and is run as a short run of its own.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.driver import seed
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.plans import AS_SEEDED as AS_SEEDED_NAME
from pg_claimcheck.plans import PLAN_QUERIES
from pg_claimcheck.plans.shape import prepare_plan_table
from pg_claimcheck.plans.timing import PAUSE_SETTING, claim_marks
from pg_claimcheck.server.runcontext import RunContext, refuses_blocks
from pg_claimcheck.server.schema import SeededJobs, key_base, reset_schema

CONDITION_JOBS = 300
"""Jobs in a condition's table (fewer when the check's own run has fewer, never under five batches):
enough for a rescanned subquery to take many times its limit, few enough that a safe claim drains
in a fraction of a second."""
SMALL_QUEUE_JOBS = 50
"""The small queue's jobs (at least five batches): the size at which Oban 2.14's claim took 41 rows for LIMIT 2."""
HISTORY_JOBS = 10_000
"""Finished jobs kept in the table with history, behind CONDITION_JOBS ready ones."""
CONDITION_WORKERS = 4
HOOK_LOCK_TIMEOUT = "10s"
EXPIRY_LEASE_S = 0.5
"""lease-expiry's lease: a stalled worker sleeps 2.5 of them (FaultPlan.stall_factor) before it completes."""
EXPIRY_REAP_EVERY_S = 0.1
EXPIRY_STALLS = 2
"""Workers told to stall in lease-expiry's run, at 8% and 75% of its jobs claimed (pg_claimcheck.engine.faults)."""
SNAPSHOT_PAUSE_US = 10_000
"""snapshot-pause's pause (each one 0.5 to 1.5 times it): longer than a worker's commit-then-unlock
takes on a loaded machine. At 2 workers and load 30-40, advisory-lock was caught in 7 of 10 runs
with 2 ms, 9 of 10 with 5 ms and 10 of 10 with 10 ms, que without its re-check in 8 of 10 with 2 ms
and 10 of 10 with 5 and 10 ms (tests/benchmarks/timing_conditions.py); only the claim's statements
pause, so a condition's few hundred jobs take about a second more."""
NESTED_LOOP = (("enable_hashjoin", "off"), ("enable_hashagg", "off"), ("enable_sort", "off"),
               ("enable_material", "off"))


class TablesUnavailable(ClaimcheckError):
    """A condition's tables cannot be built for this file: the condition is not applicable, said why."""


@dataclass(frozen=True)
class Condition:
    name: str
    summary: str
    """What the planner sees, in words for the report."""
    table: str = "fresh"
    """`seeded`: the run's own table (your settings); `fresh`: CONDITION_JOBS jobs, analyzed;
    `stale`: a small queue analyzed while its jobs were still being inserted, autovacuum off;
    `history`: many finished jobs and CONDITION_JOBS ready ones, analyzed (our jobs table only)."""
    settings: tuple[tuple[str, str], ...] = ()
    """Planner settings of every worker's session (`under`), `SET LOCAL` in the EXPLAIN's transaction."""
    timing: bool = False
    """A timing condition: its tables behind views that pause each worker statement once, after its
    snapshot and before its locks, for `claimcheck.pause_us` of its settings (pg_claimcheck.plans.timing).
    It changes no plan, so it is run whatever plan it shows."""
    expiry: bool = False
    """A lease-expiry condition: a short lease, a reaper every EXPIRY_REAP_EVERY_S, and EXPIRY_STALLS
    workers that sleep past their lease after a claim and then complete (pg_claimcheck.engine.faults's
    stall): a completion after its lease ended is tried. Lease mode only; it changes no plan, so it is
    run whatever plan it shows."""

    def applies_to(self, strategy: Strategy) -> bool:
        """A table with history is built from our jobs table's columns: a file's own tables have none we know."""
        return self.table != "history" or not strategy.own_schema

    @property
    def generic(self) -> bool:
        """Generic plans: the plan a prepared statement gets, without its parameters' values."""
        return dict(self.settings).get("plan_cache_mode") == "force_generic_plan"

    def unavailable(self, stateless_workers: bool, statement_pooled: bool = False) -> str | None:
        """Why the workers cannot run the claim under this condition, or None. Through a pooler
        (RunContext.stateless) they prepare nothing, their parameters bound on the client: no claim of
        theirs is ever planned generically, whatever plan_cache_mode says, while the EXPLAIN (of a
        PREPARE) shows the generic plan; the condition would read "held" untried. Behind statement
        pooling the `SET LOCAL`s cannot share the claim's transaction: it is one statement there."""
        if self.settings and statement_pooled:
            return ("its settings are SET LOCAL in the claim's transaction, and behind statement pooling a claim "
                    "is one statement, its own transaction: a transaction block is refused there")
        if self.generic and stateless_workers:
            return ("generic plans are those of prepared statements, and through a pooler the workers prepare "
                    "nothing (their parameters are bound on the client): no claim would run the plan shown")
        return None

    def jobs(self, settings_jobs: int, batch: int) -> int:
        """The jobs of a condition's own tables (the as-seeded run keeps your --jobs: see condition_settings)."""
        if self.table == "stale":  # small whatever --jobs says: a queue that drained and refilled
            return max(SMALL_QUEUE_JOBS, 5 * batch)
        return max(min(CONDITION_JOBS, settings_jobs), 5 * batch)


AS_SEEDED = Condition(AS_SEEDED_NAME, "the tables as seeded and analyzed, with your settings (the run without plans)",
                      "seeded")
STALE = Condition("stale-stats", f"a small queue ({SMALL_QUEUE_JOBS} jobs) whose statistics say it is empty: "
                  "analyzed while its jobs were being inserted, autovacuum and autoanalyze off", "stale")
NESTED = Condition("nested-loop", "hash joins, hash aggregation, sorts and materialization off "
                   f"({', '.join(k for k, _ in NESTED_LOOP)} = off)", settings=NESTED_LOOP)
GENERIC = Condition("generic-plan", "generic plans: plan_cache_mode = force_generic_plan, the plan a prepared "
                    "claim gets without its parameters' values", settings=(("plan_cache_mode", "force_generic_plan"),))
HISTORY = Condition("history", f"a queue with history: {HISTORY_JOBS:,} finished jobs behind the ready ones, analyzed",
                    "history")
SNAPSHOT_PAUSE = Condition("snapshot-pause", f"each claim statement of the workers pauses about {SNAPSHOT_PAUSE_US // 1000} "
                           "ms at the first row it reads, after its snapshot and before its locks: another "
                           "worker's commit and unlock land between them", settings=((PAUSE_SETTING, str(SNAPSHOT_PAUSE_US)),), timing=True)
LEASE_EXPIRY = Condition("lease-expiry", f"leases of {EXPIRY_LEASE_S:g} s, reaped every {EXPIRY_REAP_EVERY_S:g} s, "
                        f"and {EXPIRY_STALLS} workers that sleep past their lease after a claim, then complete it: "
                        "another worker has the job by then (lease mode)", expiry=True)
DEFAULT = (AS_SEEDED, STALE, NESTED, GENERIC, HISTORY, SNAPSHOT_PAUSE, LEASE_EXPIRY)
EXTRA = (
    Condition("no-hashjoin", "hash joins off", settings=(("enable_hashjoin", "off"),)),
    Condition("no-hash", "hash joins and hash aggregation off",
              settings=(("enable_hashjoin", "off"), ("enable_hashagg", "off"))),
    Condition("no-hash-merge", "hash joins, hash aggregation and merge joins off",
              settings=(("enable_hashjoin", "off"), ("enable_hashagg", "off"), ("enable_mergejoin", "off"))),
    Condition("nested-loop-only", "every join method but the nested loop off, sorts and materialization too",
              settings=(*NESTED_LOOP, ("enable_mergejoin", "off"))),
    Condition("stale-generic", "the small queue with stale statistics, and generic plans", "stale",
              settings=(("plan_cache_mode", "force_generic_plan"),)),
)
CHOICES = {"none": (), "default": DEFAULT, "all": DEFAULT + EXTRA}
"""`--plans`: none is the run without conditions (the run as seeded, no EXPLAIN)."""
BY_NAME = {c.name: c for c in DEFAULT + EXTRA}


def under(strategy: Strategy, condition: Condition) -> Strategy:
    """The strategy whose workers' sessions run under the condition's settings (Strategy.session: set
    when each worker connects, or per transaction through a pooler). The statements are the file's
    own: the same text, line numbers and fast path under every condition."""
    if not condition.settings:
        return strategy
    marks = claim_marks(strategy) if condition.timing else ()
    return dataclasses.replace(strategy, session=condition.settings + marks)


def build_tables(conn: psycopg.Connection, run: RunContext, strategy: Strategy, condition: Condition,
                 jobs: int) -> SeededJobs:
    """The condition's tables in the run's schema, replacing the last run's (the as-seeded ones are
    built by the driver's own seeding, exactly as a run without conditions builds them)."""
    if strategy.own_schema:
        reset_schema(conn, run.schema)
    if condition.table == "seeded":
        return seed(conn, run, strategy, jobs)
    if condition.table == "history":  # the finished jobs' ids after the ready ones
        return prepare_plan_table(conn, run.schema, finished=HISTORY_JOBS, ready=jobs, first_key=key_base(run.run_id))
    if condition.table == "stale" and refuses_blocks(conn):
        raise TablesUnavailable("its statistics are taken while the seed's transaction is still open, and the "
                                "pooler in front of --dsn is in statement mode: no transaction stays open there")
    hook = (lambda: _analyze_unseen(run)) if condition.table == "stale" else None
    seeded = seed(conn, run, strategy, jobs, while_seeding=hook)
    if hook is None and strategy.own_schema:  # our jobs table is analyzed as it is built
        _analyze(conn)
    return seeded


def _tables(conn: psycopg.Connection) -> list[tuple[sql.Composable, bool]]:
    """Each table of the run's schema, and whether it stores rows (a partitioned parent does not)."""
    return [(sql.Identifier(schema, name), stored)
            for schema, name, stored in conn.execute(PLAN_QUERIES["schema_tables"]).fetchall()]


def _analyze(conn: psycopg.Connection) -> None:
    for table, _ in _tables(conn):
        conn.execute(sql.SQL("ANALYZE {}").format(table))


def _analyze_unseen(run: RunContext) -> None:
    """While the seed's transaction is open, on a connection of its own: autovacuum off on every
    table of the schema (it would analyze them after the seed commits), then ANALYZE, which counts
    none of the rows still being inserted. The planner then believes the tables empty (an estimate
    of one row) however many jobs they hold: a queue analyzed when it had drained, refilled since."""
    with run.connect("plans", in_schema=True) as other:
        # The seed's transaction waits on us: a lock it holds that we need (DDL in `seed`) must end
        # in an error, not in a wait for ever.
        other.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(HOOK_LOCK_TIMEOUT)))
        tables = _tables(other)
        try:
            for table, stored in tables:
                if stored:
                    other.execute(sql.SQL(PLAN_QUERIES["autovacuum_off"]).format(table=table))
            for table, _ in tables:
                other.execute(sql.SQL("ANALYZE {}").format(table))
        except psycopg.errors.LockNotAvailable:
            raise TablesUnavailable("the seed's transaction holds a lock ANALYZE needs (a DDL statement in "
                                    "'seed'? in 'schema' it would not)") from None
