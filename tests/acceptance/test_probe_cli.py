"""The probe verbs as a user runs them: tables, JSON, exit codes, and nothing left behind."""
import json
import os
import signal
import time

import pytest

NAIVE_NO_LOCK = "naive-subquery"


def one_paragraph(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    return " ".join(stderr.split())


def test_vacuum_prints_the_table_and_writes_json(cli):
    out = cli.scratch / "vacuum.json"
    result = cli("vacuum", "--jobs", "300", "--holders", "none,claim", "--soak", "1", "--json", str(out))
    assert result.code == 0, result.stderr
    for text in ("dead but", "not removable", "archive step", "soak"):
        assert text in result.stdout
    doc = json.loads(out.read_text())
    assert doc["postgres"]["source"] == "dsn" and doc["postgres"]["version"]
    assert doc["probe"] == "vacuum" and doc["settings"]["jobs"] == 300
    none, claim = doc["holders"]
    assert claim["vacuum_while_held"]["dead_not_removable"] >= 0.9 * 2 * 300  # claim + completion per job
    after = claim["vacuum_after_release"]
    assert after["removed"] + after["dead_not_removable"] >= 0.9 * 2 * 300
    outside = claim["outside_holders_after_release"]
    if not (outside["sessions"] or outside["prepared_xacts"] or outside["replication_slots"]):
        assert after["removed"] >= 0.9 * 2 * 300  # a shared server's other sessions may hold them still
    assert doc["archive"]["deleted"] == 300
    assert [p["holder"] for p in doc["soak"]] == ["none", "repeatable-read"]
    cli.assert_nothing_left()


def test_notify_prints_the_timeline_and_writes_json(cli):
    out = cli.scratch / "notify.json"
    result = cli("notify", "--enqueues", "5", "--poll-ms", "50", "--fallback-ms", "500", "--json", str(out))
    assert result.code == 0, result.stderr
    assert "payload string too long" in result.stdout and "COMMIT" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["probe"] == "notify" and doc["postgres"]["version"]
    assert doc["delivery_at_commit"]["holds"] is True
    assert [w["kind"] for w in doc["wakeup"]] == ["listen", "poll"]
    assert all(w["claimed"] == 5 for w in doc["wakeup"])
    assert set(doc["wakeup"][0]["latency_ms"]) == {"p50", "p95", "p99", "max"}
    cli.assert_nothing_left()


def test_explain_holds_for_skip_locked(cli):
    out = cli.scratch / "explain.json"
    result = cli("explain", "skip-locked", "--json", str(out))
    assert result.code == 0, result.stderr
    assert "LockRows" in result.stdout and "shape holds" in result.stdout
    (plan,) = json.loads(out.read_text())["plans"]
    assert plan["shape_ok"] is True and any("LockRows" in line for line in plan["plan"])
    cli.assert_nothing_left()


def test_explain_fails_a_claim_without_a_lock(cli):
    result = cli("explain", NAIVE_NO_LOCK)
    assert result.code == 1, result.stderr
    assert "SHAPE FAILS" in result.stdout and "no LockRows node" in one_paragraph(result.stdout)
    cli.assert_nothing_left()


@pytest.mark.parametrize("args,message", [
    (["vacuum", "--jobs", "0"], "--jobs must be between 1 and 1,000,000, got 0"),
    (["vacuum", "--holders", "forever"], "--holders 'forever'"),
    (["vacuum", "--soak", "0.1"], "--soak must be between 0.5 and 3,600, got 0.1"),
    (["vacuum", "--strategy", "nope"], "no strategy named 'nope'"),
    (["notify", "--enqueues", "-1"], "--enqueues must be"),
    (["notify", "--poll-ms", "0"], "--poll-ms must be"),
    (["explain", "nope"], "no strategy named 'nope'"),
    (["explain", "skip-locked", "--ready", "0"], "--ready must be"),
])
def test_bad_numbers_and_names_exit_2(cli, args, message):
    result = cli(*args)
    assert result.code == 2
    assert message in one_paragraph(result.stderr)
    cli.assert_nothing_left()


@pytest.mark.parametrize("verb", ["vacuum", "notify", "explain"])
def test_bad_dsn_exits_2(cli, verb):
    extra = ["skip-locked"] if verb == "explain" else []
    result = cli(verb, *extra, "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert result.code == 2
    assert "cannot connect to PostgreSQL" in one_paragraph(result.stderr)
    cli.assert_nothing_left()


def test_explain_of_a_file_the_server_rejects_exits_2(cli):
    path = cli.scratch / "bad.sql"
    path.write_text("-- name: claim\nUPDATE jobs SET nope = 1 RETURNING id\n")
    result = cli("explain", str(path))
    assert result.code == 2
    assert 'column "nope" of relation "jobs" does not exist' in one_paragraph(result.stderr)
    cli.assert_nothing_left()


def interrupt_under_way(cli, *argv: str) -> None:
    """Ctrl-C once the probe's schema exists (it is under way): exit 2, said, nothing left."""
    proc = cli.start(*argv)
    deadline = time.monotonic() + 60
    while not any(item.startswith("schema") for item in cli.leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "interrupted" in " ".join(err.split())
    cli.assert_nothing_left()


def test_ctrl_c_during_a_soak_stops_cleanly(cli):
    interrupt_under_way(cli, "vacuum", "--soak", "20", "--jobs", "500")


def test_idle_compares_the_seeds_three_options_and_writes_json_and_html(cli):
    out = cli.scratch / "idle.json"
    result = cli("idle", "--window", "2", "--wakeup", "poll,drain,notify", "--poll-ms", "200,60000,60000",
                 "--suspend-after", "30", "--json", str(out))
    assert result.code == 0, result.stderr
    for text in ("poll every 0.2s", "drain every 60s", "LISTEN, poll 60s", "own sessions only"):
        assert text in " ".join(result.stdout.split())
    doc = json.loads(out.read_text())
    assert doc["probe"] == "idle"
    poll, drain, listen = doc["idle"]
    assert poll["would_suspend"] is False and poll["wakes_per_hour"] == 0
    assert drain["would_suspend"] is True and listen["would_suspend"] is True
    assert listen["resume"]["job_claimed_after_s"] is not None
    assert [v["suspend_after_s"] for v in poll["verdicts"]] == [30, 300]
    assert "<svg" in out.with_suffix(".html").read_text()
    cli.assert_nothing_left()


def test_ctrl_c_during_an_idle_window_stops_cleanly(cli):
    interrupt_under_way(cli, "idle", "--window", "60", "--wakeup", "notify")
