"""`claimcheck` as a user runs it: exit codes, messages, and nothing left behind."""
import json
import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

SKIP_LOCKED = Path(__file__).parents[2] / "scenarios" / "skip_locked.sql"
NAIVE = Path(__file__).parents[2] / "scenarios" / "naive_subquery.sql"
SMALL = ["--workers", "4", "--jobs", "400"]


def write(cli, text: str) -> str:
    path = cli.scratch / "my_claim.sql"
    path.write_text(text)
    return str(path)


def one_paragraph(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    return " ".join(stderr.split())


def test_check_a_safe_user_file_exits_0_and_writes_json(cli):
    copy = write(cli, SKIP_LOCKED.read_text())
    out = cli.scratch / "report.json"
    result = cli("check", copy, *SMALL, "--json", str(out))
    assert result.code == 0, result.stderr
    assert "exactly-once held" in result.stdout
    # It ends with the conclusion the HTML shows: what held, and at what cost.
    assert "lease mode: my_claim · b10 held in every run" in result.stdout.split("planner conditions (docs/plans.md)")[-1]
    doc = json.loads(out.read_text())
    assert doc["postgres"]["source"] == "dsn" and doc["postgres"]["version"]
    (run,) = [r for r in doc["runs"] if r["condition"] == "as-seeded"]  # the others: planner conditions
    for key in ("strategy", "workers", "jobs", "batch", "mode", "claims", "unique_jobs_claimed",
                "double_claimed_jobs", "extra_claims", "unclaimed_jobs", "jobs_done", "serialization_failures",
                "elapsed_s", "throughput_jobs_per_s", "claim_latency_ms", "wait_events", "max_waiting_workers",
                "exactly_once"):
        assert key in run, key
    assert run["exactly_once"] is True and run["unique_jobs_claimed"] == 400
    assert set(run["claim_latency_ms"]) == {"p50", "p95", "p99", "max"}
    cli.assert_nothing_left()


def test_check_an_unsafe_file_exits_1_with_evidence(cli):
    result = cli("check", write(cli, NAIVE.read_text()), "--workers", "8", "--jobs", "2000")
    assert result.code == 1, result.stderr
    assert "handed to more than one worker" in result.stdout
    assert "attempt 1" in result.stdout and "attempt 2" in result.stdout and "worker w" in result.stdout
    assert "exactly-once violated" in result.stdout
    cli.assert_nothing_left()


@pytest.mark.parametrize("text,message", [
    ("-- name: complete\nUPDATE jobs SET status = 'done' WHERE id = %(id)s\n", "no '-- name: claim' section"),
    ("-- name: claim\nUPDATE jobs SET status='running' WHERE id IN (SELECT id FROM jobs LIMIT %(n)s) RETURNING id\n",
     "unknown parameter(s) %(n)s"),
    ("-- name: claim\nUPDATE jobz SET status = 'running' RETURNING id\n", 'relation "jobz" does not exist'),
    # A seed whose last statement returns nothing: what the contract needs, not psycopg's words.
    ("-- name: schema\nCREATE TABLE q (id bigserial PRIMARY KEY);\n-- name: seed\n"
     "INSERT INTO q SELECT FROM generate_series(1, %(jobs)s);\n-- name: remaining\nSELECT count(*) FROM q;\n"
     "-- name: claim\nDELETE FROM q WHERE id = (SELECT min(id) FROM q) RETURNING id;\n",
     "its last statement ran but returned nothing. The contract needs the seed's last statement to return the key "
     "of each job it created, one row per job (INSERT ... RETURNING id)"),
])
def test_bad_sql_file_exits_2_and_leaves_nothing(cli, text, message):
    result = cli("check", write(cli, text), *SMALL)
    assert result.code == 2
    assert message in one_paragraph(result.stderr)
    assert "my_claim.sql" in result.stderr
    cli.assert_nothing_left()


def test_a_queue_that_makes_no_progress_exits_3_with_its_cause_not_as_a_violation(cli):
    """Safety and liveness are different verdicts (issue 31, item 6): a claim that never takes a job
    hands none out twice and loses none; the run's time runs out with every job still queued."""
    never = "-- name: claim\nSELECT id, attempts FROM jobs WHERE false LIMIT %(batch)s;\n"
    out = cli.scratch / "report.json"
    result = cli("check", write(cli, never), "--workers", "2", "--jobs", "20", "--duration", "1", "--plans", "none",
                 "--json", str(out))
    assert result.code == 3, result.stderr
    assert "NO PROGRESS" in result.stdout and "VIOLATED" not in result.stdout
    assert "no job was finished in the run's" in " ".join(result.stdout.split())
    run = json.loads(out.read_text())["runs"][0]
    assert run["outcome"] == "no-progress" and run["exactly_once"] is False and run["double_claimed_jobs"] == 0
    cli.assert_nothing_left()


NULL_KEY_CLAIM = """-- name: claim
UPDATE jobs SET status = 'running', attempts = attempts + 1
WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING CASE WHEN id > 0 THEN NULL END::bigint AS id, attempts;
"""


def test_a_claim_returning_a_null_key_is_named_by_every_run(cli):
    # Every worker fails right after the start. Each must report its own error: none may break the
    # start barrier under the others (they said "BrokenBarrierError", or "workers could not start").
    for _ in range(3):
        result = cli("check", write(cli, NULL_KEY_CLAIM), "--workers", "8", "--jobs", "200")
        assert result.code == 2
        message = one_paragraph(result.stderr)
        assert "the job's key, is NULL" in message, message
        assert "BrokenBarrier" not in message and "could not start" not in message, message
    cli.assert_nothing_left()


def test_bad_sql_on_the_embedded_server_stops_it(cli):
    result = cli("check", write(cli, "-- name: claim\nUPDATE jobs SET nope = 1 RETURNING id\n"), *SMALL,
                 "--pg", "embedded", dsn=False)
    assert result.code == 2
    assert 'column "nope" of relation "jobs" does not exist' in one_paragraph(result.stderr)
    cli.assert_nothing_left()


def test_bad_dsn_exits_2(cli):
    result = cli("check", "skip-locked", *SMALL, "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert result.code == 2
    text = one_paragraph(result.stderr)
    assert "cannot connect to PostgreSQL" in text and "127.0.0.1" in text
    cli.assert_nothing_left()


@pytest.mark.parametrize("args,message", [
    (["--workers", "0"], "--workers must be between 1 and 64, got 0"),
    (["--batch", "0"], "--batch must be between 1 and 10,000"),
    (["--work-ms", "soon"], "--work-ms 'soon'"),
    (["--pg", "oracle"], "--pg 'oracle'"),
    (["--lease-seconds", "0"], "--lease-seconds must be positive and at most 86,400, got 0"),
    (["--reap-every", "0"], "--reap-every must be positive and at most 86,400, got 0"),
])
def test_bad_options_exit_2_before_anything_starts(cli, args, message):
    result = cli("check", "skip-locked", *args)
    assert result.code == 2
    assert message in one_paragraph(result.stderr)
    cli.assert_nothing_left()


def test_docker_without_an_engine_is_a_clear_error(cli):
    result = cli("check", "skip-locked", *SMALL, "--pg", "docker:17", dsn=False)
    if result.code == 0:
        pytest.skip("a Docker engine answers here")
    assert result.code == 2
    assert "docker" in one_paragraph(result.stderr).lower()
    cli.assert_nothing_left()


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "double-ctrl-c"])
def test_interrupt_stops_workers_server_and_schema(cli, how):
    proc = cli.start("check", "skip-locked", "--workers", "4", "--jobs", "100000", "--work-ms", "5",
                     "--pg", "embedded", dsn=False)
    # Interrupt mid-run: once the server and the four workers are up, and a moment later.
    deadline = time.monotonic() + 60
    while len(_descendants(proc.pid)) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    if how == "ctrl-c":  # a terminal sends SIGINT to the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    elif how == "double-ctrl-c":  # an impatient user: the second arrives while cleanup runs
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.15)
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "interrupted" in one_paragraph(err)
    assert "stopped and its directory" in one_paragraph(err)  # said because it was done
    cli.assert_nothing_left()


def _descendants(pid: int) -> list:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def test_bench_runs_a_subset_and_writes_the_reports(cli, record_property):
    """One bench run shows the JSON, the HTML next to it, and pgbench parity (reported, not asserted)."""
    result = cli("bench", "--strategies", "naive-subquery,skip-locked", "--workers", "4", "--jobs", "500",
                 "--mode", "lease", "--work-ms", "0", "--pgbench")
    assert result.code == 0, result.stderr
    assert "naive-subquery" in result.stdout and "skip-locked" in result.stdout and "ratio" in result.stdout
    reports = list((cli.scratch / "reports").glob("bench-*.json"))
    assert len(reports) == 1
    assert f"(in {cli.scratch}; --json PATH writes elsewhere)" in result.stdout  # it says where it wrote
    conclusion = result.stdout.split("HTML report:")[-1]  # the last lines: what held, what to pick, why
    assert "of 2 runs held exactly-once" in conclusion and "lease mode: " in conclusion and "skip-locked" in conclusion
    runs = json.loads(reports[0].read_text())["runs"]
    assert [r["strategy"] for r in runs] == ["naive-subquery", "skip-locked"]
    for run in runs:
        assert run["pgbench_jobs_per_s"] > 0 and run["pgbench_ratio"] > 0
        # What each side's client used of the CPU: the workers' (measured in each worker process),
        # the coordinator's, and pgbench's own process.
        assert run["cpu_s"]["workers"] > 0 and run["cpu_s"]["coordinator"] > 0 and run["pgbench"]["cpu_s"] > 0
        assert "client CPU per job" in result.stderr
        assert sum(map(sum, run["claims_over_time"]["workers"].values())) == run["claims"]
        record_property(f"pgbench_ratio {run['strategy']} 4w b10 500 jobs", run["pgbench_ratio"])
    page = reports[0].with_suffix(".html")
    charts = re.findall(r'data-chart="([a-z-]+)"', page.read_text())
    assert charts[:5] == ["throughput", "double-claims", "claim-latency", "lock-waits", "claims-over-time"]
    assert "<script" not in page.read_text()
    cli.assert_nothing_left()


def test_bench_repeat_keeps_every_repetition_and_compare_tests_them(cli):
    out = cli.scratch / "r.json"
    result = cli("bench", "--strategies", "skip-locked", "--workers", "2", "--jobs", "200", "--mode", "lease",
                 "--repeat", "3", "--json", str(out))
    assert result.code == 0, result.stderr
    assert "repetition 3 of 3" in result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    rates = sorted(r["throughput_jobs_per_s"] for r in run["repetitions"])
    assert len(rates) == 3 and run["throughput"]["n"] == 3
    assert run["throughput_jobs_per_s"] == run["throughput"]["median"] == rates[1]
    same = cli("compare", str(out), str(out))
    assert same.code == 0 and "(n=3)" in same.stdout, same.stdout + same.stderr
    cli.assert_nothing_left()


def test_interleave_prints_the_seed_000_trace_and_exits_1(cli):
    result = cli("interleave", "seed000_naive_subquery")
    assert result.code == 1, result.stderr
    assert "step b_claim: UPDATE jobs" in result.stdout and "<waiting ...>" in result.stdout
    assert "step b_claim: <... completed>" in result.stdout
    assert "claims: A owns 1, 2, 3; B owns 1, 2, 3" in result.stdout
    cli.assert_nothing_left()


@pytest.mark.parametrize("text,message", [
    ("session A\nstep a1 { BEGIN }\nstep a2 { COMMIT \n", "bad.spec:3: '{' is never closed"),
    ("session A\nstep a1 { BEGIN }\npermutation a1 b9\n", "bad.spec:3: permutation names unknown step 'b9'"),
    ("session A\nstep a1 { BEGIN }\nstep a2 { UPDATE nosuchtable SET x = 1 }\n",
     'bad.spec:3: step a2 fails on the server: relation "nosuchtable" does not exist'),
])
def test_bad_spec_exits_2_naming_the_line(cli, text, message):
    path = cli.scratch / "bad.spec"
    path.write_text(text)
    result = cli("interleave", str(path))
    assert result.code == 2
    assert message in one_paragraph(result.stderr)
    cli.assert_nothing_left()


def test_search_prints_a_replayable_counterexample(cli):
    saved = cli.scratch / "cx.spec"
    result = cli("check", "naive-subquery", "--search", "--seed", "1", "--save-spec", str(saved),
                 "--hypothesis-db", str(cli.scratch / "hdb"))
    assert result.code == 1, result.stderr
    assert "double claim found and shrunk" in result.stdout and "<waiting ...>" in result.stdout
    replay = cli("interleave", str(saved))
    assert replay.code == 1 and "DOUBLE CLAIM: job 1" in replay.stdout
    cli.assert_nothing_left()


def test_check_of_an_unsafe_claim_stops_at_the_first_proven_violation(cli):
    out = cli.scratch / "check.json"
    result = cli("check", "naive-single", "--workers", "8", "--jobs", "5000", "--json", str(out))
    assert result.code == 1, result.stderr
    text = " ".join(result.stdout.split())
    # Either proof may come first: the second claim itself, or the completion it fenced off.
    assert "stopped early:" in text and "add --drain" in text
    assert "claimed a second time" in text or "changed no row" in text
    (run,) = json.loads(out.read_text())["runs"]
    assert run["stopped_by"] == "violation" and run["violations"]
    assert run["exactly_once"] is False
    cli.assert_nothing_left()


def test_check_drain_runs_to_the_end(cli):
    out = cli.scratch / "check.json"
    result = cli("check", "naive-subquery", "--workers", "4", "--jobs", "500", "--drain", "--json", str(out))
    assert result.code == 1, result.stderr
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) >= 2  # --drain runs every planner condition, past the first violated one
    assert all(run["stopped_by"] == "drained" and run["unclaimed_jobs"] == 0 for run in runs)
    assert "stopped early" not in result.stdout


def test_a_complete_that_never_changes_a_row_fails_the_check(cli):
    claim = write(cli, SKIP_LOCKED.read_text().split("-- name: complete")[0] +
                  "-- name: complete\nUPDATE jobs SET status = 'done' WHERE id = %(id)s AND status = 'queued';\n")
    result = cli("check", claim, *SMALL, "--drain")
    assert result.code == 1, result.stderr
    text = " ".join(result.stdout.split())
    assert "never finished: their completion changed no row" in text and "exactly-once violated" in text
    cli.assert_nothing_left()


def test_help_texts_say_what_each_verb_has(cli):
    bench = cli("bench", "--help")
    assert bench.code == 0 and "--faults" not in bench.stdout and "faults" not in bench.stdout
    assert "reports/" in bench.stdout and "--wide" in bench.stdout
    faults = cli("faults", "--help")
    flat = " ".join(faults.stdout.split())
    for option, words in (("--kills N", "SIGKILL"), ("--terminates N", "pg_terminate_backend"),
                          ("--stalls N", "leases after a claim"), ("--restarts N", "restart the server")):
        assert option in flat and words in flat, option
    assert "--drain" in cli("check", "--help").stdout


def test_bench_rate_sweep_splits_each_rates_schedule_between_its_producers(cli):
    # bench's --producers is check's: each rate run's schedule shared by N producer processes.
    out = cli.scratch / "sweep.json"
    result = cli("bench", "--strategies", "skip-locked", "--workers", "2", "--jobs", "5", "--mode", "lease",
                 "--rate", "20,40", "--duration", "1", "--producers", "2", "--json", str(out))
    assert result.code == 0, result.stderr
    runs = json.loads(out.read_text())["runs"]
    assert [r["offered_rate_per_s"] for r in runs] == [20, 40]
    for run, scheduled in zip(runs, (20, 40)):
        assert [p["producer"] for p in run["producers"]] == [0, 1]
        assert sum(p["scheduled_jobs"] for p in run["producers"]) == run["scheduled_jobs"] == scheduled
    alone = cli("bench", "--strategies", "skip-locked", "--producers", "2")
    assert alone.code == 2 and "--producers needs --rate" in alone.stderr
    cli.assert_nothing_left()
