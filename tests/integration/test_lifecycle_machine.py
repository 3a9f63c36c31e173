"""A hypothesis state machine drives one strategy's statements against the real server:
claim, complete, fail, extend, expire (move a lease into the past), reap and crash, checking
after every step that no job is owned twice, that done jobs are never claimed again, that
attempts stay within max_attempts, and that a fenced completion by a worker that no longer owns
its job changes no row. A failure prints as a replayable list of steps.

How the search finds the unfenced completion's story (a claim, its lease runs out, the reaper
returns the job, the first holder completes it) every time from an empty database. Hypothesis's
stateful search switches rules off at random per example (swarm testing: each rule disabled with a
probability drawn per example), and the story needed four rules on at once (claim, expire, reap,
and complete or fail), in that order, with the finish drawn for the right worker among three.
Measured on the old machine (fenced strategy, 300 examples, two runs): `claim` ran in 68% of the
examples, `complete` in 23%, `fail` in 27%, and the story's last step in 2% and 15% of them; the
unfenced search needed from 6 to 219 examples (10 runs), so a budget of 200 could miss it. Now
every worker starts holding a claim (`initialize`, which swarm testing never switches off);
`lease_runs_out` is the lease's end and the reaper's pass as one step (`expire` and `reap` stay,
so a worker can still act between the two); and a finish or extension is drawn for a worker that
holds a claim, never for one that holds none. The story's last step then came in 39% of the
examples, and the unfenced search found it within 5 to 29 examples in 40 runs of 40. The workers'
connections live across examples (a crash still replaces one): a connection cost about 17 ms, a
statement 0.3 ms.
"""
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg import sql

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import load_strategy, sample_params
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema

WORKERS = ("w0", "w1", "w2")
JOBS = 6
MAX_ATTEMPTS = 3
RESET = ("UPDATE jobs SET status = 'queued', attempts = 0, locked_until = NULL, last_error = NULL, "
         "max_attempts = %s, run_at = timestamptz '2000-01-01' + id * interval '1 microsecond'")
"""Every example starts from the seeded queue: each job queued, in id order. One statement on the
table the fixture built (a TRUNCATE and a new seed took 50 ms an example on a busy machine; this, 3-6)."""
MACHINE_SETTINGS = settings(max_examples=25, stateful_step_count=25, deadline=None,
                            suppress_health_check=list(HealthCheck))


def machine_for(server, strategy_name: str, schema: str, admin: psycopg.Connection,
                conns: dict[str, psycopg.Connection]):
    """`conns`: the workers' connections, kept across examples (the caller closes them); each
    statement is its own transaction, so an example leaves nothing on them for the next."""
    strategy = load_strategy(strategy_name)
    statements = strategy.statements

    def connect() -> psycopg.Connection:
        conn = psycopg.connect(server.dsn, autocommit=True)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn

    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            admin.execute(RESET, (MAX_ATTEMPTS,))
            for w in WORKERS:
                if w not in conns or conns[w].closed:
                    conns[w] = connect()
            self.conns = conns
            self.owner: dict[int, tuple[str, int]] = {}      # job -> the claim that owns it now
            self.held: dict[str, set[tuple[int, int]]] = {w: set() for w in WORKERS}  # what workers believe
            self.done: set[int] = set()
            self.expired: set[int] = set()

        def _run(self, worker: str, section: str, **values) -> psycopg.Cursor:
            base = {"worker": worker, "batch": 1, "lease_seconds": 60, "error": "machine", "backoff_unit_s": 0,
                    "backoff_cap_s": 3600, "id": 0, "attempts": 0}
            base.update(values)
            return self.conns[worker].execute(statements[section], sample_params(strategy, section, **base))

        @initialize()
        def every_worker_holds_a_claim(self):
            for worker in WORKERS:
                self.claim(worker, 1)

        @rule(worker=st.sampled_from(WORKERS), batch=st.integers(1, 2))
        def claim(self, worker, batch):
            for job, attempt in self._run(worker, "claim", batch=batch).fetchall():
                assert job not in self.done, f"job {job} was done and got claimed again"
                assert job not in self.owner, f"job {job} claimed by {worker} while {self.owner[job]} owns it"
                self.owner[job] = (worker, attempt)
                self.held[worker].add((job, attempt))

        def _holder(self, data) -> str:
            """A worker that holds a claim (the precondition says one does): a finish drawn for a
            worker holding nothing would be a step that does nothing."""
            return data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]))

        def _pick(self, worker, data):
            return data.draw(st.sampled_from(sorted(self.held[worker])))

        def _finish(self, worker, data, section):
            job, attempt = self._pick(worker, data)
            self.held[worker].discard((job, attempt))
            changed = self._run(worker, section, id=job, attempts=attempt).rowcount
            if self.owner.get(job) == (worker, attempt):
                assert changed == 1, f"{section} of job {job} by its owner changed no row"
                del self.owner[job]
                self.expired.discard(job)
                return job
            assert changed == 0, f"stale {section} of job {job} by {worker} (attempt {attempt}) changed a row"
            return None

        @precondition(lambda self: any(self.held.values()))
        @rule(data=st.data())
        def complete(self, data):
            job = self._finish(self._holder(data), data, "complete")
            if job is not None:
                self.done.add(job)

        @precondition(lambda self: any(self.held.values()))
        @rule(data=st.data())
        def fail(self, data):
            self._finish(self._holder(data), data, "fail")

        @precondition(lambda self: any(self.held.values()))
        @rule(data=st.data())
        def extend(self, data):
            worker = self._holder(data)
            job, attempt = self._pick(worker, data)
            changed = self._run(worker, "extend", id=job, attempts=attempt).rowcount
            assert changed == (1 if self.owner.get(job) == (worker, attempt) else 0)
            if changed:
                self.expired.discard(job)

        @precondition(lambda self: self.owner)
        @rule(data=st.data())
        def expire(self, data):
            """Advance one claim past its lease (time travel on the row, not on the clock)."""
            job = data.draw(st.sampled_from(sorted(self.owner)))
            admin.execute("UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job,))
            self.expired.add(job)

        @precondition(lambda self: self.owner)
        @rule(data=st.data())
        def lease_runs_out(self, data):
            """A claim's lease ends and the reaper runs: one event as the workers see it (the two
            rules apart let a worker act between them, e.g. extend an expired lease)."""
            self.expire(data)
            self.reap()

        @rule()
        def reap(self):
            returned = {}
            for job, attempts, status in admin.execute(QUERIES["reap_expired"]).fetchall():
                returned[job] = attempts
            assert set(returned) == self.expired & set(self.owner), "the reaper must return exactly the expired leases"
            for job, attempts in returned.items():
                assert self.owner[job][1] == attempts
                del self.owner[job]
                self.expired.discard(job)

        @rule(worker=st.sampled_from(WORKERS))
        def crash(self, worker):
            """The worker dies: its connection goes, and what it held stays running until reaped."""
            self.conns[worker].close()
            self.conns[worker] = connect()
            self.held[worker].clear()

        @invariant()
        def table_agrees(self):
            rows = dict((r[0], r[1:]) for r in admin.execute("SELECT id, status, attempts, max_attempts FROM jobs"))
            for job, (worker, attempt) in self.owner.items():
                assert rows[job][:2] == ("running", attempt), (job, rows[job], worker)
            for job in self.done:
                assert rows[job][0] == "done"
            assert all(attempts <= max_attempts for _, attempts, max_attempts in rows.values())

    return QueueMachine


@pytest.fixture
def machine_space(server):
    conns: dict[str, psycopg.Connection] = {}
    with run_schema(server) as (admin, run):
        schema = run.schema
        build_jobs_table(admin, schema, JOBS)
        try:
            yield admin, schema, conns
        finally:
            for conn in conns.values():
                conn.close()


def test_fenced_strategy_holds_every_invariant(server, machine_space):
    admin, schema, conns = machine_space
    run_state_machine_as_test(machine_for(server, "skip-locked", schema, admin, conns), settings=MACHINE_SETTINGS)


SEARCH_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
"""Every phase but `explain`, which varies each step of the shrunk story to say which ones matter:
two thirds of the search's time (cProfile), for comments on a story the test already has."""


def test_unfenced_completion_is_found_with_a_replayable_story(server, machine_space):
    admin, schema, conns = machine_space
    with pytest.raises(AssertionError, match="stale .* changed a row") as found:
        run_state_machine_as_test(machine_for(server, "skip-locked-unfenced", schema, admin, conns),
                                  settings=settings(MACHINE_SETTINGS, max_examples=200, phases=SEARCH_PHASES))
    # The story, as Hypothesis prints it to replay: the shrunk steps, ending with the stale finish.
    story = [n for n in getattr(found.value, "__notes__", []) if n.startswith("state.")]
    steps = [s for s in story if not s.startswith(("state.table_agrees", "state.teardown"))]
    assert steps and steps[-1].startswith(("state.complete(", "state.fail(")), story


def test_failed_jobs_wait_by_the_seeds_backoff(server, machine_space):
    """run_at after a failure is now() + least(cap, unit * 2^attempts), read back from the table:
    20 s after the first failure with the seed's 10 s unit, 40 s after the second, capped at the cap."""
    admin, _, _ = machine_space
    strategy = load_strategy("skip-locked")
    admin.execute("UPDATE jobs SET max_attempts = 20")
    seen = {}
    for attempts, cap in ((1, 3600), (2, 3600), (5, 3600), (9, 3600), (9, 100)):
        admin.execute("UPDATE jobs SET status = 'running', attempts = %s WHERE id = 1", (attempts,))
        with admin.transaction():  # now() is the transaction's start, so the wait is exact
            admin.execute(strategy.statements["fail"], sample_params(
                strategy, "fail", id=1, attempts=attempts, worker="w0", error="boom", backoff_unit_s=10,
                backoff_cap_s=cap))
            wait = admin.execute("SELECT extract(epoch FROM run_at - now()), status FROM jobs WHERE id = 1").fetchone()
        seen[(attempts, cap)] = (float(wait[0]), wait[1])
    assert seen == {(1, 3600): (20.0, "queued"), (2, 3600): (40.0, "queued"), (5, 3600): (320.0, "queued"),
                    (9, 3600): (3600.0, "queued"), (9, 100): (100.0, "queued")}
