"""How a library's executions become the ledger's claims and releases (pg_claimcheck.libs.records)."""
from pg_claimcheck.libs.records import parse, to_ledger
from pg_claimcheck.verdict.ledger import DONE, LIVE, STALE, judge


def lines(*rows: tuple) -> str:
    return "".join("\t".join(str(x) for x in row) + "\n" for row in rows)


def verdict(files, jobs, **kwargs):
    logs, reaps, _ = to_ledger(files, **kwargs)
    return judge(logs, 1, jobs, drained=True, reaps=reaps)


def test_each_execution_is_a_claim_numbered_by_start_time():
    files = {0: lines(("S", 1, 101, 0, 1.0, 0), ("E", 1, 1.1), ("S", 2, 102, 0, 1.2, 0), ("E", 2, 1.3))}
    v = verdict(files, 2, deaths={}, stall_release_s=1.0)
    assert v.exactly_once and v.claims == 2 and v.redeliveries == 0


def test_a_torn_last_line_is_ignored():
    executions, stalls = parse(0, lines(("S", 1, 101, 0, 1.0, 0)) + "E\t1\t1.")
    assert len(executions) == 1 and stalls == []


def test_two_workers_at_once_is_a_double_execution():
    files = {0: lines(("S", 1, 101, 0, 1.0, 0), ("E", 1, 2.0)), 1: lines(("S", 1, 101, 1, 1.5, 0), ("E", 1, 1.6))}
    v = verdict(files, 1, deaths={}, stall_release_s=1.0)
    assert not v.exactly_once and v.violations[0].kind == "concurrent"


def test_finished_twice_without_a_failure_in_between_is_a_violation():
    files = {0: lines(("S", 1, 101, 0, 1.0, 0), ("E", 1, 1.1)), 1: lines(("S", 1, 101, 0, 5.0, 0), ("E", 1, 5.1))}
    v = verdict(files, 1, deaths={}, stall_release_s=1.0)
    assert v.violations[0].kind == "after-done"


def test_a_killed_workers_job_run_again_after_the_kill_is_a_redelivery():
    files = {0: lines(("S", 1, 101, 0, 1.0, 0)), 1: lines(("S", 1, 101, 1, 3.0, 0), ("E", 1, 3.1))}
    v = verdict(files, 1, deaths={0: 2.0}, stall_release_s=1.0)
    assert v.exactly_once and v.redeliveries == 1
    early = verdict(files, 1, deaths={0: 3.5}, stall_release_s=1.0)  # run again while the first still ran
    assert not early.exactly_once


def test_a_stalled_execution_may_be_redelivered_once_its_lease_can_have_expired():
    stalled = lines(("S", 1, 101, 0, 1.0, 0), ("P", 1, 1.0), ("E", 1, 6.0))
    after = {0: stalled, 1: lines(("S", 1, 101, 1, 2.5, 0), ("E", 1, 2.6))}
    logs, reaps, _ = to_ledger(after, deaths={}, stall_release_s=1.0)
    assert [log.outcome[0] for log in logs] == [STALE, DONE]  # the stalled one returned after its release
    assert judge(logs, 1, 1, drained=True, reaps=reaps).exactly_once
    before = {0: stalled, 1: lines(("S", 1, 101, 1, 1.5, 0), ("E", 1, 1.6))}
    assert not verdict(before, 1, deaths={}, stall_release_s=1.0).exactly_once


def test_a_lease_that_runs_from_the_claim_releases_a_stalled_execution_from_its_claim():
    """delayed_job: ready again once locked_at < now - max_run_time, however late the job started
    after its claim; never before the stall itself (until then its worker was alive)."""
    stalled = lines(("S", 1, 101, 0, 1.4, 0.4), ("P", 1, 1.4), ("E", 1, 6.0))  # claimed at 1.0
    rerun = {0: stalled, 1: lines(("S", 1, 101, 1, 3.1, 0), ("E", 1, 3.2))}
    assert verdict(rerun, 1, deaths={}, stall_release_s=2.0, claim_lease_s=2.0).exactly_once
    assert not verdict(rerun, 1, deaths={}, stall_release_s=2.0).exactly_once  # from the stall: 3.4
    early = lines(("S", 1, 101, 0, 3.5, 2.5), ("P", 1, 3.5), ("E", 1, 6.0))  # claimed at 1.0, stalled at 3.5
    before_stall = {0: early, 1: lines(("S", 1, 101, 1, 3.2, 0), ("E", 1, 3.3))}
    assert not verdict(before_stall, 1, deaths={}, stall_release_s=2.0, claim_lease_s=2.0).exactly_once


def test_a_heartbeat_lease_runs_from_the_claim_until_the_first_beat_is_written():
    """pgqueuer (heartbeat_timeout 2 s, stall_release_s 0.6 s): on a loaded machine a job's task started 1.5 s
    after its claim and stalled before its first beat was written, so its heartbeat was the claim's and
    pgqueuer re-picked it at claim + 2 s, 0.5 s into the stall: its promise (a stale heartbeat), a redelivery.
    A re-pick before claim + 2 s would have taken a job with a fresh heartbeat: still a violation."""
    pgqueuer = dict(deaths={}, stall_release_s=0.6, claim_lease_s=2.0, completion_lag_s=2.0)
    stalled = lines(("S", 1, 101, 0, 15.0, 1.5), ("P", 1, 15.0), ("E", 1, 20.0))  # claimed at 13.5
    repicked = {0: stalled, 1: lines(("S", 1, 101, 1, 15.52, 0), ("E", 1, 15.55))}
    v = verdict(repicked, 1, **pgqueuer)
    assert v.exactly_once and v.redeliveries == 1
    assert verdict(repicked, 1, **{**pgqueuer, "claim_lease_s": 0.0}).violations[0].kind == "concurrent"
    fresh = {0: stalled, 1: lines(("S", 1, 101, 1, 15.3, 0), ("E", 1, 15.35))}
    assert verdict(fresh, 1, **pgqueuer).violations[0].kind == "concurrent"


def test_a_terminated_backend_releases_completions_still_in_the_librarys_buffer():
    files = {0: lines(("S", 1, 101, 0, 1.0, 0), ("E", 1, 1.95)), 1: lines(("S", 1, 101, 0, 5.0, 0), ("E", 1, 5.1))}
    kwargs = dict(deaths={}, stall_release_s=1.0, completion_lag_s=0.3, lease_s=2.0)
    assert verdict(files, 1, terminations={0: [2.0]}, **kwargs).exactly_once
    assert not verdict(files, 1, terminations={0: [3.0]}, **kwargs).exactly_once  # finished long before


def test_an_execution_never_seen_to_end_stays_live():
    logs, _, _ = to_ledger({0: lines(("S", 1, 101, 0, 1.0, 0))}, deaths={}, stall_release_s=1.0)
    assert logs[0].outcome[0] == LIVE


def test_a_batch_claimed_before_a_stall_is_released_with_it():
    # w0 claims jobs 1 and 2 at 1.0, stalls on job 1 until 6.0, then runs job 2 (claimed 5 s before):
    # w1 re-claimed job 2 at 3.0 after w0's lease expired, so w0's late run is a stale execution.
    stalled = lines(("S", 1, 101, 0, 1.0, 0), ("P", 1, 1.0), ("E", 1, 6.0), ("S", 2, 102, 0, 6.0, 5.0), ("E", 2, 6.1))
    files = {0: stalled, 1: lines(("S", 2, 102, 0, 3.0, 0), ("E", 2, 3.1))}
    logs, reaps, _ = to_ledger(files, deaths={}, stall_release_s=1.0)
    assert judge(logs, 1, 2, drained=True, reaps=reaps).exactly_once
    assert list(logs[0].outcome) == [STALE, STALE]


def test_a_library_adapter_counts_each_run_from_its_own_seed():
    """An adapter serves several runs (bench's, the tests' session fixture): a fed run's jobs must not be
    counted as enqueued in the next run (a healthy graphile-worker run read 70 done for its 60 jobs)."""
    from pg_claimcheck.libs._adapter import ForgetsJobs
    adapter = ForgetsJobs()
    adapter.seeded_now(10)
    adapter.fed(10)
    assert adapter.outcome_params() == {"enqueued": 20}
    adapter.seeded_now(60)
    assert adapter.outcome_params() == {"enqueued": 60}
