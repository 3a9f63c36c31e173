"""The serverless monitor's rule (pg_claimcheck.verdict.activity) on hand-built samples: what counts as activity,
quiet gaps, periods, and the suspend verdicts with how each was reached."""
from __future__ import annotations

import pytest

from pg_claimcheck.verdict.activity import (
    HOUR_S,
    Resume,
    Sample,
    Session,
    activities,
    bursts,
    cause_of,
    footprint,
    period,
    quiet,
)

T0 = 1_000_000.0
CLAIM = "WITH picked AS (SELECT id FROM jobs WHERE status = 'queued' LIMIT 10 FOR UPDATE SKIP LOCKED) UPDATE ..."
ROLES = {"poll-worker": "claim poll", "listen-worker": "LISTEN fallback poll"}


def idle(pid: int, changed: float, query: str = CLAIM, role: str = "poll-worker", started: float = T0 - 1) -> Session:
    return Session(pid, role, "idle", changed, started, query)


def sampled(changes: list[float], every: float = 0.5, span: float = 10.0, query: str = CLAIM) -> list[Sample]:
    """Samples every `every` s over `span` s of one idle session whose last query ended at each of `changes`."""
    out, t = [], T0
    while t <= T0 + span + 1e-9:
        done = [c for c in changes if c <= t]
        out.append(Sample(t, (idle(1, max(done) if done else T0 - 1, query),)))
        t += every
    return out


def test_an_idle_session_counts_as_of_its_last_state_change_not_as_of_the_sample():
    samples = sampled([T0 + 1.23, T0 + 4.56], span=6)
    seen = [a for a in activities(samples, ROLES) if a.seen == "ended"]
    assert [round(a.at - T0, 2) for a in seen] == [-1, 1.23, 4.56]
    assert all(a.cause == "claim poll" for a in seen)


def test_a_session_running_at_a_sample_counts_at_the_sample():
    samples = [Sample(T0, (Session(1, "poll-worker", "active", T0 - 0.1, T0 - 5, CLAIM),)),
               Sample(T0 + 0.5, (Session(1, "poll-worker", "idle in transaction", T0 + 0.2, T0 - 5, CLAIM),))]
    running = [a for a in activities(samples, ROLES) if a.seen == "running"]
    assert [a.at for a in running] == [T0, T0 + 0.5]


def test_several_queries_between_two_samples_count_once_as_of_the_last():
    # Queries end at +0.1, +0.2, +0.3: the sample at +0.5 reads only the last state change, as the monitor does.
    samples = [Sample(T0, (idle(1, T0 - 1),)), Sample(T0 + 0.5, (idle(1, T0 + 0.3),))]
    ended = [a.at for a in activities(samples, ROLES) if a.seen == "ended"]
    assert ended[-1] == T0 + 0.3 and T0 + 0.1 not in ended


def test_a_new_session_is_a_connect_and_a_second_one_of_the_same_role_a_reconnect():
    samples = [Sample(T0, (Session(1, "listen-worker", "idle", T0 - 2, T0 - 2, ""),)),
               Sample(T0 + 0.5, ()),
               Sample(T0 + 1.0, (Session(2, "listen-worker", "idle", T0 + 0.8, T0 + 0.7, "LISTEN x"),))]
    found = activities(samples, ROLES)
    assert [(a.cause, a.at) for a in found] == [("connect", T0 - 2), ("reconnect", T0 + 0.7), ("LISTEN", T0 + 0.8)]


def test_autovacuum_counts_at_the_sample():
    found = activities([Sample(T0, (), ("autovacuum: VACUUM claimcheck_x.jobs",))])
    assert [a.cause for a in found] == ["autovacuum"]


@pytest.mark.parametrize("query, role, cause", [
    ("LISTEN \"claimcheck_x_feed\"", "listen-worker", "LISTEN"),
    ("SELECT 1", "w00", "pool health check"),
    ("UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = $1", "w00", "heartbeat"),
    ('INSERT INTO "saq_stats" (worker_id, stats, queue_key, metadata, expire_at) VALUES ($1)', "w00", "heartbeat"),
    ("COMMIT", "poll-worker", "transaction"),
    (CLAIM, "listen-worker", "LISTEN fallback poll"),
    (CLAIM, "poll-worker", "claim poll"),
    ("SELECT * FROM procrastinate_fetch_job($1)", "w00", "claim poll"),
    ("SELECT count(*) FROM t", "w00", "query"),
])
def test_causes_come_from_the_query_text_then_the_role(query, role, cause):
    assert cause_of(role, query, ROLES) == cause


def test_bursts_join_moments_closer_than_the_sampling_interval():
    assert bursts([0.0, 0.1, 0.2, 5.0, 5.3]) == [(0.0, 0.2), (5.0, 5.3)]


def test_quiet_gaps_and_the_tail():
    q = quiet([T0 - 1, T0 + 2, T0 + 5], T0, T0 + 9)
    assert q.gaps_s == (3.0, 3.0) and q.tail_s == 4.0 and q.longest_s == 4.0


def test_period_needs_three_regular_bursts():
    assert period([T0 + 1, T0 + 2, T0 + 3, T0 + 4], T0) == pytest.approx(1.0)
    assert period([T0 + 1, T0 + 2], T0) is None
    assert period([T0 + 1, T0 + 2, T0 + 8], T0) is None  # irregular


def test_polling_every_second_never_suspends_period_seen():
    fp = footprint("poll every 1s", sampled([T0 + i for i in range(1, 10)]), T0, [600, 300], claim_roles=ROLES)
    assert fp.period_s == pytest.approx(1.0)
    for v in fp.verdicts:
        assert v.would_suspend is False and v.wakes_per_hour == 0 and v.basis == "period seen"
    assert fp.causes()["claim poll"] >= 9


def test_a_quiet_gap_over_the_threshold_seen_suspends():
    # A short threshold so the gap fits the window: quiet from +1 to +7 (6 s) with a 5 s threshold.
    fp = footprint("x", sampled([T0 + 1, T0 + 7, T0 + 8]), T0, [5], claim_roles=ROLES)
    v = fp.verdicts[0]
    assert v.would_suspend is True and v.basis == "quiet seen" and fp.quiet.longest_s == pytest.approx(6)


def test_nothing_after_start_up_suspends_and_says_the_window_could_miss_a_longer_period():
    fp = footprint("x", sampled([]), T0, [600], claim_roles=ROLES)
    v = fp.verdicts[0]
    assert v.would_suspend is True and v.basis == "no activity" and "would not show" in v.reason
    assert v.wakes_per_hour is None  # nothing seen wakes it


def test_an_interval_longer_than_the_window_is_the_designs_own_and_says_so():
    samples = sampled([])
    under = footprint("x", samples, T0, [600], interval_s=60).verdicts[0]
    assert under.would_suspend is False and under.basis == "interval"
    over = footprint("x", samples, T0, [600], interval_s=900).verdicts[0]
    assert over.would_suspend is True and over.wakes_per_hour == pytest.approx(HOUR_S / 900)
    assert over.asleep_share == pytest.approx(300 / 900)


def test_a_reconnect_at_once_after_the_suspend_wakes_it_every_threshold():
    resume = Resume(reconnected_after_s=0.2, watched_s=1.0)
    v = footprint("x", sampled([]), T0, [600], interval_s=900, resume=resume).verdicts[0]
    assert v.would_suspend is True and v.wakes_per_hour == pytest.approx(HOUR_S / 600.2)
    assert v.asleep_share == pytest.approx(0.2 / 600.2)  # it suspends, and is resumed at once
    assert "reconnects" in v.reason


def test_a_design_with_no_session_left_is_woken_by_its_schedule_not_a_reconnect():
    samples = [Sample(T0 + i * 0.5) for i in range(21)]
    v = footprint("drain", samples, T0, [600], interval_s=900,
                  resume=Resume(reconnected_after_s=0.1, watched_s=1)).verdicts[0]
    assert v.wakes_per_hour == pytest.approx(4.0)


def test_json_of_a_footprint_names_the_contract_fields():
    d = footprint("poll every 1s", sampled([T0 + i for i in range(1, 10)]), T0, [600, 300],
                  claim_roles=ROLES).as_dict()
    assert {"longest_quiet_s", "would_suspend", "wakes_per_hour", "causes", "timeline", "verdicts"} <= set(d)
    assert d["would_suspend"] is False and d["timeline"][0]["t_s"] <= 0


def test_the_html_report_draws_a_mark_per_moment_in_the_window_and_a_row_per_design():
    from pg_claimcheck.report.idle_html import render

    rows = [footprint(name, sampled([T0 + i for i in range(1, n)]), T0, [600, 300], claim_roles=ROLES).as_dict()
            for name, n in (("poll every 1s", 10), ("LISTEN, poll 15 min", 1))]
    page = render({"idle": rows, "postgres": {"version": "18"}, "tool": {"command": "claimcheck idle"}})
    assert page.count("<rect") == 9 + 2  # nine claims in the window; the legend's two causes (connect, claim poll)
    assert "poll every 1s" in page and "LISTEN, poll 15 min" in page and "suspends @300s" in page
