"""What each planner condition asks of a run, without a server (pg_claimcheck.plans.conditions)."""
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.plans.conditions import AS_SEEDED, CHOICES, HISTORY, NESTED, STALE, under
from pg_claimcheck.plans.explore import CONDITION_SECONDS, condition_settings
from pg_claimcheck.settings import FaultPlan, RunSettings

USER = RunSettings(workers=16, jobs=20_000, batch=10, faults=FaultPlan(), reap_every_s=0.5, lease_seconds=2.0)


def test_a_condition_is_a_short_run_that_still_drains_and_the_as_seeded_run_is_yours():
    small = condition_settings(STALE, USER)
    assert (small.jobs, small.workers, small.faults, small.time_cap_s) == (50, 4, None, CONDITION_SECONDS)
    assert small.drains  # the workers stop at the drain; the cap ends only a run that has not
    assert condition_settings(STALE, RunSettings(jobs=1_000_000, batch=100)).jobs == 500  # five batches, not --jobs
    assert condition_settings(NESTED, RunSettings(jobs=40, batch=1)).jobs == 40
    assert condition_settings(AS_SEEDED, USER) is USER


def test_a_condition_s_settings_travel_with_the_session_and_leave_the_statements_as_written():
    plain = Strategy(name="x", statements={"claim": "UPDATE jobs SET x = 1 RETURNING id"}, lines={"claim": ("f", 6)})
    conditioned = under(plain, NESTED)
    assert conditioned.statements == plain.statements and conditioned.lines == plain.lines
    assert conditioned.session == NESTED.settings and len(conditioned.steps("claim")) == 1  # the fast path's shape
    assert under(plain, STALE) is plain  # a table condition changes nothing of the strategy


def test_the_choices():
    assert CHOICES["none"] == () and CHOICES["default"][0] is AS_SEEDED
    assert set(CHOICES["default"]) < set(CHOICES["all"])
    own = Strategy(name="o", statements={"schema": "…", "seed": "…", "remaining": "…", "claim": "…"})
    assert not HISTORY.applies_to(own) and STALE.applies_to(own)


def test_generic_plans_are_not_applicable_when_the_workers_prepare_nothing():
    # Through a pooler the workers' claims are bound on the client and never prepared: the generic
    # plan the EXPLAIN shows is one no claim runs, and the condition would have read "held" untried.
    from pg_claimcheck.plans.conditions import BY_NAME, GENERIC

    from pg_claimcheck.server.pgbouncer import PoolerSpec
    from pg_claimcheck.server.topology import DIRECT, Topology

    pooled = Topology.asked(PoolerSpec("transaction"))
    for condition in (GENERIC, BY_NAME["stale-generic"]):
        assert condition.unavailable(DIRECT) is None
        assert "through a pooler the workers prepare nothing" in condition.unavailable(pooled)
    assert all(c.unavailable(pooled) is None for c in CHOICES["all"] if not c.generic)


def test_a_timing_condition_marks_the_claim_s_statements_by_their_text_between_parameters():
    from pg_claimcheck.plans.conditions import SNAPSHOT_PAUSE
    from pg_claimcheck.plans.timing import MARK_SEPARATOR, MARKS_SETTING, PAUSE_SETTING

    picked = Strategy(name="p", statements={
        "pick": "SELECT id FROM jobs WHERE status = 'queued' LIMIT %(batch)s",
        "claim": "UPDATE jobs SET status = 'running' WHERE id = ANY(%(id)s)",
        "complete": "UPDATE jobs SET status = 'done' WHERE id = %(id)s"})
    session = dict(under(picked, SNAPSHOT_PAUSE).session)
    assert session[PAUSE_SETTING] == "10000"
    assert session[MARKS_SETTING].split(MARK_SEPARATOR) == ["SELECT id FROM jobs WHERE status = 'queued' LIMIT",
                                                           "UPDATE jobs SET status = 'running' WHERE id = ANY("]
    short = Strategy(name="s", statements={"claim": "SELECT f(%(batch)s)"})  # nothing to tell it apart: all pause
    assert MARKS_SETTING not in dict(under(short, SNAPSHOT_PAUSE).session)
