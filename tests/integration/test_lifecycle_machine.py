"""A hypothesis state machine drives one strategy's statements against the real server:
claim, complete, fail, extend, expire (move a lease into the past), reap and crash, checking
after every step that no job is owned twice, that done jobs are never claimed again, that
attempts stay within max_attempts, and that a fenced completion by a worker that no longer owns
its job changes no row. A failure prints as a replayable list of steps."""
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from psycopg import sql

import psycopg
from claimcheck.contract.queries import QUERIES
from claimcheck.server.schema import build_jobs_table
from claimcheck.server.session import run_schema
from claimcheck.contract.strategy import load_strategy, sample_params

WORKERS = ("w0", "w1", "w2")
JOBS = 6
MAX_ATTEMPTS = 3
MACHINE_SETTINGS = settings(max_examples=25, stateful_step_count=25, deadline=None,
                            suppress_health_check=list(HealthCheck))


def machine_for(server, strategy_name: str, schema: str, admin: psycopg.Connection):
    strategy = load_strategy(strategy_name)
    statements = strategy.statements

    def connect() -> psycopg.Connection:
        conn = psycopg.connect(server.dsn, autocommit=True)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn

    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            admin.execute("TRUNCATE jobs RESTART IDENTITY")
            admin.execute(QUERIES["seed_jobs"], {"jobs": JOBS})
            admin.execute("UPDATE jobs SET max_attempts = %s", (MAX_ATTEMPTS,))
            self.conns = {w: connect() for w in WORKERS}
            self.owner: dict[int, tuple[str, int]] = {}      # job -> the claim that owns it now
            self.held: dict[str, set[tuple[int, int]]] = {w: set() for w in WORKERS}  # what workers believe
            self.done: set[int] = set()
            self.expired: set[int] = set()

        def teardown(self) -> None:
            for conn in self.conns.values():
                conn.close()

        def _run(self, worker: str, section: str, **values) -> psycopg.Cursor:
            base = {"worker": worker, "batch": 1, "lease_seconds": 60, "error": "machine", "backoff_unit_s": 0,
                    "backoff_cap_s": 3600, "id": 0, "attempts": 0}
            base.update(values)
            return self.conns[worker].execute(statements[section], sample_params(strategy, section, **base))

        @rule(worker=st.sampled_from(WORKERS), batch=st.integers(1, 2))
        def claim(self, worker, batch):
            for job, attempt in self._run(worker, "claim", batch=batch).fetchall():
                assert job not in self.done, f"job {job} was done and got claimed again"
                assert job not in self.owner, f"job {job} claimed by {worker} while {self.owner[job]} owns it"
                self.owner[job] = (worker, attempt)
                self.held[worker].add((job, attempt))

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
        @rule(worker=st.sampled_from(WORKERS), data=st.data())
        def complete(self, worker, data):
            if self.held[worker]:
                job = self._finish(worker, data, "complete")
                if job is not None:
                    self.done.add(job)

        @precondition(lambda self: any(self.held.values()))
        @rule(worker=st.sampled_from(WORKERS), data=st.data())
        def fail(self, worker, data):
            if self.held[worker]:
                self._finish(worker, data, "fail")

        @precondition(lambda self: any(self.held.values()))
        @rule(worker=st.sampled_from(WORKERS), data=st.data())
        def extend(self, worker, data):
            if not self.held[worker]:
                return
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
    with run_schema(server) as (admin, schema, _):
        build_jobs_table(admin, schema, JOBS)
        yield admin, schema


def test_fenced_strategy_holds_every_invariant(server, machine_space):
    admin, schema = machine_space
    run_state_machine_as_test(machine_for(server, "skip-locked", schema, admin), settings=MACHINE_SETTINGS)


def test_unfenced_completion_is_found_with_a_replayable_story(server, machine_space):
    admin, schema = machine_space
    with pytest.raises(AssertionError, match="stale .* changed a row"):
        run_state_machine_as_test(machine_for(server, "skip-locked-unfenced", schema, admin),
                                  settings=settings(MACHINE_SETTINGS, max_examples=200))


def test_failed_jobs_wait_by_the_seeds_backoff(server, machine_space):
    """run_at after a failure is now() + least(cap, unit * 2^attempts), read back from the table:
    20 s after the first failure with the seed's 10 s unit, 40 s after the second, capped at the cap."""
    admin, _ = machine_space
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
