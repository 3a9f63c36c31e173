"""The field corpus: claim designs of real job-queue libraries, each judged on a real server.

Each `.sql` file here translates one library's claim (and completion) as faithfully as the SQL
contract allows, and cites its source in a `-- source:` header. The verdict is computed from the
run, never from the `-- expected:` header; this test checks that the two agree, so a change in
claimcheck that flips a real library's verdict fails the suite. Runs are small (4 workers, a
couple of hundred jobs) to keep `make test` fast; each test records its time to verdict.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import pg_claimcheck
from pg_claimcheck.contract.sqlfile import read_sql_file
from pg_claimcheck.contract.strategy import HEADER_KEYS, load_strategy
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.interleave.spec import read_spec
from pg_claimcheck.interleave.specs import run_spec
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings, WorkTime

HERE = Path(__file__).parent
SMALL = {"workers": 4, "jobs": 200}
ONE = {**SMALL, "batch": 1}
"""For designs that claim one job (a fixed LIMIT 1): batch 1, so a second row is an over-claim."""
PRUNED = {"workers": 4, "jobs": 30, "batch": 1, "reap_every_s": 0.1, "work": "0-600"}


@dataclass(frozen=True)
class Case:
    file: str
    settings: dict = field(default_factory=lambda: dict(SMALL))
    expected: str = "safe"
    """What the run must conclude: `safe` (exactly-once held) or `unsafe`."""
    why: str = ""
    plans: bool = False
    """Run as a plain `check` runs it: under the default planner conditions too (docs/plans.md), the
    verdict the worst of them. For the designs whose verdict is decided by the plan (issue 22); the
    others run as seeded only, to keep the suite short."""

    @property
    def id(self) -> str:
        return self.file.removesuffix(".sql") + (f"[{self.why}]" if self.why else "")


CASES = [
    Case("que_0_14_session_advisory.sql", ONE),
    Case("que_0_14_session_advisory.sql", {**ONE, "mode": "lock"}, why="lock mode"),
    Case("good_job_3_99_advisory_uuid.sql", ONE),
    Case("graphile_worker_0_1_job_queues.sql", ONE),
    Case("graphile_worker_0_17_batch.sql"),
    Case("procrastinate_0_x_job_locks_fixed.sql", ONE),
    Case("procrastinate_3_8_unique_lock.sql", {**ONE, "jobs": 120}),
    # Its leases hold in these runs: exactly-once. (The header's `unsafe` is lease-expiry's verdict,
    # a stall past the heartbeat timeout: tests/integration/test_lease_expiry.py. So for pgmq.)
    Case("pgqueuer_1_3_heartbeat.sql"),
    # Work outlasting the heartbeat timeout while the heartbeat keeps up: never re-taken.
    Case("pgqueuer_1_3_heartbeat.sql", {"workers": 4, "jobs": 16, "batch": 1, "lease_seconds": 0.3,
                                        "work": "400-600"}, why="heartbeats"),
    Case("pgmq_1_5_visibility_timeout.sql"),
    # Work outlasting the visibility timeout: the message is re-read (a redelivery, judged by the
    # server's clock) and the first reader's unfenced delete then removes it from under the second
    # reader: a stale completion. pgmq promises exactly-once only within the visibility timeout.
    # Work times vary (400-800 ms, all beyond the 200 ms vt), as real work does: with one fixed time
    # the workers finish in lockstep and each delete may land before any re-read (seen once in 4).
    Case("pgmq_1_5_visibility_timeout.sql", {"workers": 4, "jobs": 16, "batch": 1, "lease_seconds": 0.2,
                                             "work": "400-800"}, expected="unsafe", why="work beyond vt"),
    Case("solid_queue_1_5_claimed_executions.sql"),
    Case("solid_queue_1_5_claimed_executions.sql", {**SMALL, "mode": "lock"}, why="lock mode"),
    # A historical double execution and its fix: processes pruned while their job still runs (the
    # reap section every 0.1 s releases claims older than 300 ms; work takes 0-600 ms).
    Case("solid_queue_1_4_prune_unfenced_finish.sql", PRUNED, expected="unsafe", why="pruned"),
    Case("solid_queue_1_5_claimed_executions.sql", PRUNED, why="pruned"),
    Case("queue_classic_3_1_nowait.sql", ONE),
    Case("queue_classic_4_0_skip_locked.sql", ONE, plans=True),
    Case("delayed_job_ar_0_4_3_select_then_lock.sql", ONE, expected="unsafe"),
    Case("delayed_job_ar_0_4_4_update_returning.sql", ONE, expected="unsafe", plans=True),
    Case("pg_boss_10_4_uuid.sql"),
    Case("river_0_43_job_get_available.sql"),
    # Issue 22: the limiting subquery rescanned on the inner side of a nested loop, and the fixes.
    # Plain checks at their defaults; the LIMITs written in the claims are their own limits.
    Case("oban_2_14_in_subquery.sql", expected="unsafe", plans=True),
    Case("oban_2_18_cte.sql", plans=True),
    Case("queue_classic_4_0_alpha1_in_subquery.sql", expected="unsafe", plans=True),
    Case("ecto_job_2_0_join_subquery.sql", expected="unsafe", plans=True),
    Case("ecto_job_2_1_pick_then_any.sql", plans=True),
    Case("delayed_job_ar_4_1_1_in_subquery.sql", expected="unsafe", plans=True),
    Case("delayed_job_ar_pr177_cte.sql", plans=True),
    Case("so_73966670_outbox_delete_in_subquery.sql", expected="unsafe", plans=True),
    Case("so_73966670_outbox_cte.sql", plans=True),
    # LIMIT 100 and no %(batch)s: judged against 100, not --batch's 10 (issue 22, item 4).
    Case("hasura_event_fetch_repeatable_read.sql"),
]


def test_every_file_is_in_the_corpus_and_cites_its_source():
    files = {p.name for p in HERE.glob("*.sql")}
    assert files == {c.file for c in CASES}
    for name in files:
        headers = read_sql_file(HERE / name, HEADER_KEYS).headers
        assert headers.get("source"), f"{name} cites no source"
        assert headers.get("expected") in ("safe", "unsafe"), name


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_field_design_verdict(server, case: Case, record_property):
    settings = dict(case.settings)
    if "work" in settings:
        settings["work"] = WorkTime.parse(settings["work"])
    strategy = load_strategy(str(HERE / case.file))
    started = time.perf_counter()
    if case.plans:
        result = pg_claimcheck.run(HERE / case.file, server=server, plans="default", **settings)
    else:
        with run_schema(server) as (conn, run):
            result = run_strategy(conn, server, run, strategy, RunSettings(**settings))
    seconds = time.perf_counter() - started
    v = result.verdict
    under = f" under {result.condition}" if case.plans else ""
    record_property(f"field {case.id}", f"{'exactly-once' if result.exactly_once else 'VIOLATED'}{under}, "
                    f"{v.double_claimed_jobs} double claims, {v.stale_completion_violations} stale completions, "
                    f"{v.redeliveries} redeliveries, errors {result.claim_errors or '-'}, {seconds:.2f} s to verdict")
    if case.expected == "safe":
        assert result.exactly_once, (case.file, v.violations[:2], v.unclaimed_jobs, result.unfinished_jobs)
        assert v.unique_jobs_claimed == settings["jobs"] and v.claims == settings["jobs"] + v.redeliveries
    else:
        assert not result.exactly_once
        assert v.double_claimed_jobs or v.stale_completion_violations or v.over_claims
    if case.why == "heartbeats":
        assert v.redeliveries == 0
    if case.why == "pruned":  # the scenario happened: claims were released while their job ran
        assert v.redeliveries > 0
    if case.why == "work beyond vt":
        assert v.redeliveries > 0 and v.stale_completion_violations > 0
        assert all(x.kind == "stale-completion" for x in v.violations)


def test_procrastinate_fetch_can_end_in_unique_violation(server):
    """PR #1241's author is right (see the spec's comment): a same-lock job enqueued while a fetch
    is in flight makes a second fetch fail with 23505 once the first commits; nothing is handed out twice."""
    spec = read_spec(HERE / "procrastinate_3_8_unique_violation.spec")
    [result] = run_spec(server, spec)
    b_fetch = [r for kind, r in result.events if kind == "completed"]
    assert [r.sqlstate for r in b_fetch] == ["23505"]
    assert not result.double_claims and result.owned == {1: [("A", 0)]}
