"""Rendering is a function of plain results: render into a fixed-width console and read the text."""
import dataclasses
import io
import math
from collections import Counter

from rich.console import Console

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.faults import FaultEvent
from pg_claimcheck.engine.sampler import WaitSamples
from pg_claimcheck.report.render import evidence_lines, faults_table, print_evidence, results_table
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.settings import FaultPlan, RunSettings
from pg_claimcheck.verdict.ledger import DONE, LIVE, WorkerLog, judge
from pg_claimcheck.verdict.result import RunResult, TableOutcome


def result(name: str, logs, expected: str | None, *, faults=None, waits=None) -> RunResult:
    verdict = judge(logs, 1, 3, drained=True)
    return RunResult(
        strategy=Strategy(name=name, statements={"claim": "x"}, expected=expected), settings=RunSettings(
            workers=2, jobs=3, faults=FaultPlan() if faults else None),
        seeded=SeededJobs(1, 3, 3, 0.01), verdict=verdict, waits=waits or WaitSamples(),
        table=TableOutcome(done=3, queued=0, running=0, failed=0, max_attempts=2), elapsed_s=0.5,
        stopped_by="drained", claim_latency_ms={"p50": 1.25, "p95": 2.5, "p99": 12.0, "max": 20.0},
        serialization_failures=0, deadlocks=0, claim_statements=4, faults=faults or [])


def log(worker, *claims):
    out = WorkerLog(worker=worker)
    for job, attempt, at, ended in claims:
        out.record(job, attempt, at, math.nan if ended is None else ended, DONE if ended else LIVE)
    return out


def render(renderable) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_table_shows_figures_and_verdicts_from_the_ledger():
    clean = result("skip-locked", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2)), log(1, (3, 1, 0.1, 0.2))], "safe",
                   waits=WaitSamples(samples=10, events=Counter({"Lock/transactionid": 7, "Client/ClientRead": 3}),
                                     max_waiting_workers=1))
    dirty = result("naive-subquery", [log(0, (1, 1, 0.1, 0.5), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2)),
                                      log(1, (1, 2, 0.3, 0.6))], "unsafe")
    text = render(results_table([clean, dirty], "bench"))
    clean_row = next(line for line in text.splitlines() if "skip-locked" in line)
    dirty_row = next(line for line in text.splitlines() if "naive-subquery" in line)
    assert "exactly-once" in clean_row and "Lock/transactionid 7" in clean_row and "1.25/2.50/12.0" in clean_row
    assert "VIOLATED" in dirty_row and " 4 " in dirty_row  # 4 claims
    assert "6" in clean_row  # 3 done / 0.5 s = 6 jobs/s


def test_unsafe_strategy_that_passed_says_so_and_safe_one_that_failed_shouts():
    passed = result("naive-single", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2))], "unsafe")
    failed = result("skip-locked", [log(0, (1, 1, 0.1, 0.5), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2)),
                                    log(1, (1, 2, 0.3, 0.6))], "safe")
    text = render(results_table([passed, failed], "t"))
    assert "not caught this run" in text and "expected safe!" in text


def test_evidence_lines_tell_the_story_of_a_job():
    run = result("naive-subquery", [log(0, (1, 1, 0.1, 0.5), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2)),
                                    log(3, (1, 2, 0.3, None))], "unsafe")
    assert evidence_lines(run.verdict.violations) == [
        "job 1: claimed 2 times (concurrent)",
        "    worker w00  attempt 1  claimed +0.1000s  ended +0.5000s  (done)",
        "    worker w03  attempt 2  claimed +0.3000s  never ended  (live)",
    ]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_evidence(console, run)
    assert "1 job(s) handed to more than one worker" in console.file.getvalue()


def test_faults_table_lists_each_fault_and_its_jobs():
    event = FaultEvent("kill", 1.5, 3, "SIGKILL pid 42; w16 started in its place", jobs=[{
        "job": 7, "final_status": "done", "final_attempts": 2, "claims": [
            {"worker": 3, "attempt": 1, "claimed_at_s": 1.2, "ended_at_s": None, "outcome": "live"},
            {"worker": 9, "attempt": 2, "claimed_at_s": 3.4, "ended_at_s": 3.5, "outcome": "done"}]}])
    run = result("skip-locked", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2))], "safe",
                 faults=[event])
    text = render(faults_table(run))
    assert "kill" in text and "w03" in text
    assert "job 7: w03 a1 +1.20s live → w09 a2 +3.40s done ⇒ done" in text


def render_at(renderable, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_the_default_table_fits_80_columns_and_keeps_strategy_and_verdict_whole():
    runs = [result("skip-locked-unfenced", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2))], "unsafe"),
            result("naive-subquery", [log(0, (1, 1, 0.1, 0.5), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2)),
                                      log(1, (1, 2, 0.3, 0.6))], "safe")]
    for width in (80, 120):
        text = render_at(results_table(runs, "claimcheck bench: PostgreSQL 18.1 (embedded)", wide=False), width)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
        assert "…" not in text
        unfenced = next(line for line in text.splitlines() if line.startswith("skip-locked-unfenced"))
        naive = next(line for line in text.splitlines() if line.startswith("naive-subquery"))
        assert unfenced.split() == ["skip-locked-unfenced", "lease", "2", "0", "0", "6", "2.50", "exactly-once", "(*)"]
        assert naive.split() == ["naive-subquery", "lease", "2", "1", "0", "6", "2.50", "VIOLATED", "(!)"]
        assert "(*) unsafe by its header, but no violation was caught" in text and "(!) expected safe" in text
        assert "--wide" in text


def test_wide_shows_every_column():
    run = result("skip-locked", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2))], "safe")
    text = render_at(results_table([run], "t", wide=True), 200)
    for header in ("claims", "unique", "extra", "done", "ser.", "p50/p95/p99", "top lock wait", "peak"):
        assert header in text, header
    compact = render_at(results_table([run], "t", wide=False), 200)
    assert "unique" not in compact and "top lock wait" not in compact and "p50/p95/p99" not in compact


def test_the_api_failure_names_over_claims_with_their_evidence():
    # A run that fails only on over-claims: the message says so and shows the claim, as the CLI does.
    from pg_claimcheck.api import failure_message
    from pg_claimcheck.report.render import violation_summary

    run = result("mine", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2))], None)
    evidence = ({"kind": "over-claim", "worker": 0, "claimed_at_s": 0.1, "rows": 12, "limit": 10, "jobs": [1, 2]},)
    run = dataclasses.replace(run, verdict=dataclasses.replace(run.verdict, over_claims=1, shape_evidence=evidence),
                              strategy=Strategy(name="mine", statements={"claim": "SELECT id FROM q LIMIT %(batch)s"}))
    assert violation_summary(run) == ["1 over-claim(s): more rows than the claim asked for (its limit: 10 (--batch))"]
    message = failure_message(run)
    assert "over-claim" in message.splitlines()[0] and len(message.splitlines()) > 1
    assert "got 12 rows from one claim that asked for 10" in message


def test_a_failed_run_without_violating_claims_promises_no_evidence_and_counts_read_as_words():
    # After a stalled claim that returned no rows, "Evidence (times from the start of the run):"
    # was printed with nothing under it.
    stalled = dataclasses.replace(result("mine", [log(0)], None), stopped_by="no-progress",
                                  stop_reason="no job was finished for 30s")
    console = Console(file=io.StringIO(), width=300, color_system=None)
    print_evidence(console, stalled)
    text = console.file.getvalue()
    assert not stalled.exactly_once and "Evidence" not in text
    assert "0 extra claims, 0 redeliveries." in text


def test_a_job_claimed_once_is_said_so():
    # "claimed 1 times" (a never-finished job has one claim).
    doubled = judge([log(0, (1, 1, 0.1, 0.2)), log(1, (1, 2, 0.3, 0.4))], 1, 1, drained=True).violations[0]
    once = dataclasses.replace(doubled, kind="never-finished", times_claimed=1, claims=doubled.claims[:1])
    assert evidence_lines([once])[0] == "job 1: claimed once (never-finished)"
