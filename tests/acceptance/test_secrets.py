"""A password in the DSN never shows: not in any verb's output, report or HTML, not in an error,
not on any process's command line (pgbench gets it through its environment)."""
from __future__ import annotations

import secrets
import subprocess
import sys
import time

import psutil
import psycopg
import pytest
from psycopg import sql

from roles import scratch_role

PASSWORD = "Pw" + secrets.token_hex(8)


@pytest.fixture
def password_dsn(server):
    """A login role of the test's own with a password, allowed to create the run's schema; dropped after."""
    with scratch_role(server.dsn, "cc_pw_", password=PASSWORD) as (_, dsn):
        yield dsn


def _run_watching_ps(cli, args: list[str], env: dict) -> tuple[int, str, str, list[str]]:
    """Run the CLI; while it runs, look at every process's command line for the password."""
    proc = subprocess.Popen([sys.executable, "-m", "pg_claimcheck", *args], env=env, text=True, cwd=cli.scratch,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    seen: list[str] = []
    while proc.poll() is None:
        for other in psutil.process_iter(["pid", "cmdline"]):
            cmdline = " ".join(other.info["cmdline"] or [])
            if PASSWORD in cmdline:
                seen.append(f"{other.info['pid']}: {cmdline[:200]}")
        time.sleep(0.05)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err, seen


def test_no_verb_shows_the_password(cli, password_dsn):
    env = dict(cli.env(False), CLAIMCHECK_DSN=password_dsn)
    s = cli.scratch
    verbs = {
        "check": (["check", "skip-locked", "--workers", "2", "--jobs", "200", "--json", str(s / "check.json")], 0),
        "search": (["check", "skip-locked", "--search", "--max-examples", "5", "--seed", "1",
                    "--hypothesis-db", str(s / "hdb"), "--json", str(s / "search.json")], 0),
        "bench": (["bench", "--strategies", "skip-locked", "--workers", "2", "--jobs", "200", "--mode", "lease",
                   "--pgbench", "--json", str(s / "bench.json")], 0),
        "faults": (["faults", "--strategies", "skip-locked", "--workers", "3", "--jobs", "300", "--mode", "lease",
                    "--json", str(s / "faults.json")], 0),
        "vacuum": (["vacuum", "--jobs", "100", "--holders", "none", "--json", str(s / "vacuum.json")], 0),
        "notify": (["notify", "--enqueues", "3", "--poll-ms", "50", "--fallback-ms", "300",
                    "--json", str(s / "notify.json")], 0),
        "explain": (["explain", "skip-locked", "--json", str(s / "explain.json")], 0),
        "interleave": (["interleave", "seed000_naive_subquery", "--json", str(s / "interleave.json")], 1),
    }
    outputs = []
    for name, (args, expected) in verbs.items():
        code, out, err, seen = _run_watching_ps(cli, args, env)
        # faults' verdict is not under test here (a busy machine can make a stall outlive its lease)
        assert code == expected or (name == "faults" and code == 1), (name, err)
        assert not seen, (name, seen)
        outputs += [(name, out), (name, err)]
    # The password on our own command line (the user's choice), and a DSN libpq cannot parse. (The run as
    # seeded only: `check` above ran the planner conditions with the same DSN.)
    code, out, err, _ = _run_watching_ps(cli, ["check", "skip-locked", "--workers", "2", "--jobs", "100",
                                               "--plans", "none", "--dsn", password_dsn,
                                               "--json", str(s / "argv.json")], env)
    assert code == 0, err
    outputs += [("argv", out), ("argv", err)]
    broken = f"postgresql://someone:{PASSWORD}@[::1:5432/postgres"
    code, out, err, _ = _run_watching_ps(cli, ["check", "skip-locked", "--dsn", broken], env)
    assert code == 2 and "cannot connect" in err, err
    outputs += [("unparsable", out), ("unparsable", err)]
    code, out, err, _ = _run_watching_ps(cli, ["compare", str(s / "check.json"), str(s / "argv.json")], env)
    outputs += [("compare", out), ("compare", err)]

    written = [p for p in s.rglob("*") if p.is_file() and p.suffix in (".json", ".html", ".spec")]
    assert {p.name for p in written} >= {"check.json", "check.html", "bench.json", "bench.html", "vacuum.json",
                                         "argv.json", "argv.html", "search.json", "interleave.json"}
    leaks = [name for name, text in outputs if PASSWORD in text]
    leaks += [str(p) for p in written if PASSWORD in p.read_text(errors="replace")]
    assert not leaks, leaks
    assert "***" in (s / "argv.json").read_text()  # the DSN is shown, with its password hidden


def test_library_workers_never_carry_the_password_on_their_command_line(cli, password_dsn):
    """`lib` runs the library's own workers as processes of ours: their config (the DSN with its
    password) goes down a pipe, not into argv, where `ps` shows it to every user of the machine."""
    role = psycopg.conninfo.conninfo_to_dict(password_dsn)["user"]
    with psycopg.connect(cli.server.dsn, autocommit=True) as admin:  # a library run makes a database of its own
        admin.execute(sql.SQL("ALTER ROLE {} CREATEDB").format(sql.Identifier(role)))
    env = dict(cli.env(False), CLAIMCHECK_DSN=password_dsn)
    code, out, err, seen = _run_watching_ps(cli, ["lib", "saq", "--workers", "2", "--jobs", "300", "--rate", "100",
                                                  "--duration", "2"], env)
    assert code in (0, 1), err  # the verdict is not under test; the run must have run its workers
    assert "saq" in out
    assert not seen, seen
    assert PASSWORD not in out + err
    assert not [p for p in cli.scratch.rglob("*") if p.is_file() and PASSWORD in p.read_text(errors="replace")]
