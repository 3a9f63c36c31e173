"""Signals at random moments of every kind of run, and a scan for the password in every process.

The fuzz (issue 35): N trials, each one run of a kind below (`npm`: a Node library's run whose npm
cache is empty, so it starts with its first-use install), sent SIGINT (to its process group, as a
terminal's Ctrl-C), SIGTERM or SIGKILL (to the CLI alone) at a random moment of its first seconds.
After it, the run must have left nothing: no process of it (found by the run id in its environment,
so a worker re-parented to init counts), no schema, database or connection on the server, no
directory of ours in its temp directory. A SIGKILLed CLI cannot clean up by itself: its children
must die with it, and its schema and directories are the next run's to sweep (one is started, as a
user would, before they are counted). Printed: how many trials left anything (goal 0), and the
slowest exit after INT or TERM (goal under 2 s; for KILL, until the last child was gone).

The scan: one run of each kind with a password in its DSN (a role of this script's own, on a server
it starts unless --dsn is given), every process of the machine read while it runs. Printed: any
process whose command line holds the password (goal none), and which hold it in their environment
(goal: only the run's own children).

    .venv/bin/python tests/benchmarks/signal_fuzz.py [--trials 40] [--kinds check,locust,...] [--no-scan]
"""
from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg

from pg_claimcheck.server.provision import provide_server

sys.path.insert(0, str(Path(__file__).parents[1]))
from roles import scratch_role  # tests/roles.py

KINDS = {
    "check": ["check", "skip-locked", "--jobs", "100000", "--workers", "4", "--work-ms", "2", "--plans", "none"],
    "check-plans": ["check", "skip-locked", "--jobs", "20000", "--workers", "4", "--work-ms", "2"],
    "check-rate": ["check", "skip-locked", "--jobs", "100", "--workers", "4", "--rate", "200", "--duration", "30",
                   "--plans", "none"],
    "bench": ["bench", "--strategies", "skip-locked,naive-subquery", "--jobs", "20000", "--workers", "4",
              "--json", "{scratch}/bench.json"],
    "faults": ["faults", "--strategies", "skip-locked", "--jobs", "20000", "--workers", "4", "--mode", "lease",
               "--json", "{scratch}/faults.json"],
    "pooler": ["check", "skip-locked", "--jobs", "100000", "--workers", "4", "--work-ms", "2", "--plans", "none",
               "--pooler", "pgbouncer"],
    "locust": ["check", "skip-locked", "--engine", "locust", "--users", "4", "--processes", "2", "--jobs", "100000",
               "--work-ms", "2"],
    "lib": ["lib", "procrastinate", "--workers", "2", "--jobs", "20000"],
    "lib-rate": ["lib", "procrastinate", "--workers", "2", "--jobs", "100", "--rate", "100", "--duration", "30"],
    "interleave": ["interleave", "seed000_naive_subquery"],
    "npm": ["lib", "graphile-worker", "--workers", "2", "--jobs", "2000"],
}
FIRST_INSTALL = {"npm"}
"""Kinds run with an npm cache of their own, empty: the run starts with its first-use install."""
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
SWEEP = ["check", "skip-locked", "--jobs", "10", "--workers", "1", "--plans", "none"]
"""The later run that sweeps what a SIGKILLed one left (any verb does: docs/contracts.md section 5)."""
EXIT_WAIT_S = 60.0
SCAN_S = 45.0
"""How long each run is watched (a library run starts its workers after its database, schema and enqueues)."""


@dataclass
class Trial:
    kind: str
    signum: int
    delay_s: float
    exit_s: float = float("nan")
    """Signal to the CLI's exit (INT, TERM), or to the last process of the run gone (KILL)."""
    code: int | None = None
    left: list[str] = field(default_factory=list)


def _env(scratch: Path, run_id: str, dsn: str, kind: str = "") -> dict:
    env = dict(os.environ, TMPDIR=str(scratch), CLAIMCHECK_RUN_ID=run_id, CLAIMCHECK_DSN=dsn, COLUMNS="100")
    if kind in FIRST_INSTALL:
        env["CLAIMCHECK_CACHE"] = str(scratch / "cache")
    env.pop("PGPASSWORD", None)
    return env


def _start(kind: str, scratch: Path, env: dict) -> subprocess.Popen:
    argv = [a.format(scratch=scratch) for a in KINDS[kind]]
    # SIGINT as a terminal leaves it, whatever this script inherited (started with `&`, it is ignored).
    return subprocess.Popen([sys.executable, "-m", "pg_claimcheck", *argv], env=env, cwd=scratch, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _of_run(run_id: str) -> list[psutil.Process]:
    """Every live process whose environment names the run (children inherit it, whatever their parent now)."""
    found, needle = [], f"CLAIMCHECK_RUN_ID={run_id}".encode()
    for proc in psutil.process_iter(["pid"]):
        try:
            if needle in Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0") and proc.status() != "zombie":
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def _server_leftovers(dsn: str, run_id: str) -> list[str]:
    like = f"claimcheck\\_{run_id}%"
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname LIKE %s "
                            "UNION ALL SELECT 'database ' || datname FROM pg_database WHERE datname LIKE %s "
                            "UNION ALL SELECT 'connection ' || pid || ' ' || application_name FROM pg_stat_activity "
                            "WHERE application_name LIKE %s",
                            (like, like, f"claimcheck/{run_id}/%")).fetchall()
    return [r[0] for r in rows]


def _leftovers(dsn: str, run_id: str, scratch: Path) -> list[str]:
    left = [f"process {p.pid} {' '.join(p.cmdline())[:80]}" for p in _of_run(run_id)]
    left += _server_leftovers(dsn, run_id)
    left += [f"directory {d.name}" for d in scratch.glob("claimcheck-*")]
    left += [f"npm install {d.name}" for d in scratch.glob("cache/node/*.partial-*")]
    return left


def trial(kind: str, signum: int, delay_s: float, dsn: str, root: Path) -> Trial:
    scratch = Path(tempfile.mkdtemp(prefix="fz-", dir=root))
    scratch.chmod(0o755)
    run_id = "fz" + secrets.token_hex(4)
    env = _env(scratch, run_id, dsn, kind)
    t = Trial(kind, signum, delay_s)
    proc = _start(kind, scratch, env)
    time.sleep(delay_s)
    if proc.poll() is not None:
        t.code = proc.returncode
        t.left = ["(finished before the signal)"] + _leftovers(dsn, run_id, scratch)
        return t
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    t.code = proc.returncode
    t.exit_s = time.monotonic() - sent
    if signum == signal.SIGKILL:  # its children die with it: the time until the last one is gone
        deadline = sent + EXIT_WAIT_S
        while _of_run(run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        t.exit_s = time.monotonic() - sent
        time.sleep(1.0)  # the server notices the closed connections
        subprocess.run([sys.executable, "-m", "pg_claimcheck", *SWEEP], env=dict(env, CLAIMCHECK_RUN_ID=run_id + "s"),
                       cwd=scratch, capture_output=True, timeout=300)
    else:
        if "finished in" in (err or ""):  # the signal came as it was leaving: not an interrupted run
            t.left.append("(finished as the signal came)")
        if "Traceback" in (err or ""):
            t.left.append("a traceback: " + err.strip().splitlines()[-1][:100])
        if proc.returncode != 2:
            said = " | ".join((err or "").strip().splitlines()[-3:])[:300]
            t.left.append(f"exit code {proc.returncode}, not 2 (stderr ends: {said})")
        deadline = time.monotonic() + 5.0
        while _of_run(run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
    t.left += _leftovers(dsn, run_id, scratch)
    for proc_left in _of_run(run_id):  # leave the machine as we found it, whatever the verdict
        proc_left.kill()
    shutil.rmtree(scratch, ignore_errors=True)
    return t


def fuzz(dsn: str, kinds: list[str], trials: int, root: Path, rng: random.Random) -> list[Trial]:
    done = []
    for number in range(trials):
        kind, signum = kinds[number % len(kinds)], rng.choice(SIGNALS)
        delay = rng.uniform(0.3, 6.0)
        t = trial(kind, signum, delay, dsn, root)
        done.append(t)
        print(f"  {number + 1:3d} {kind:<12} {signal.Signals(signum).name:<7} at {delay:4.1f}s: exit "
              f"{t.exit_s:5.2f}s code {t.code}" + (f"  LEFT {t.left}" if t.left else ""), flush=True)
    return done


def _shown(cmdline: bytes) -> str:
    return cmdline.replace(b"\0", b" ")[:120].decode(errors="replace")


def scan(dsn: str, kinds: list[str], root: Path) -> None:
    password = "Pw" + secrets.token_hex(10)
    with scratch_role(dsn, "cc_fz_", "CREATEDB", password=password) as (role, secret_dsn):
        _scan(role, password.encode(), secret_dsn, kinds, root)


def _scan(role: str, needle: bytes, secret_dsn: str, kinds: list[str], root: Path) -> None:
    print(f"\nsecrets scan: role {role}, every process read every 0.1 s while each run is alive")
    for kind in kinds:
        scratch = Path(tempfile.mkdtemp(prefix="sc-", dir=root))
        scratch.chmod(0o755)
        run_id = "sc" + secrets.token_hex(4)
        proc = _start(kind, scratch, _env(scratch, run_id, secret_dsn, kind))
        argv, own_env, other_env, seen = set(), set(), set(), set()
        ends = time.monotonic() + SCAN_S
        mark = f"CLAIMCHECK_RUN_ID={run_id}".encode()
        while proc.poll() is None and time.monotonic() < ends:
            for other in psutil.process_iter(["pid", "name"]):
                pid = other.info["pid"]
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    environ = Path(f"/proc/{pid}/environ").read_bytes()
                except OSError:
                    continue
                name = f"{pid} {other.info['name']}"
                ours = pid == proc.pid or mark in environ.split(b"\0")  # the run's, read in the same instant
                if ours:
                    seen.add(name)
                if needle in cmdline:
                    argv.add(f"{name}: {_shown(cmdline)}")
                if needle in environ:
                    (own_env if ours else other_env).add(name if ours else f"{name} {_shown(cmdline)}")
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT) if proc.poll() is None else None
        try:
            proc.communicate(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        print(f"  {kind:<12} processes of the run seen {len(seen):3d}; password in argv: {len(argv)}"
              f"{' ' + str(sorted(argv)) if argv else ''}; in the environment of own children: {len(own_env)}, "
              f"of other processes: {len(other_env)}{' ' + str(sorted(other_env)) if other_env else ''}", flush=True)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a server of your own (default: an embedded one this script starts)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-scan", action="store_true")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    root = Path(tempfile.mkdtemp(prefix="cc-fuzz-", dir="/tmp"))
    root.chmod(0o755)
    try:
        with provide_server(dsn=args.dsn, max_connections=200) as server:
            print(f"PostgreSQL {server.version} ({server.source}); load {os.getloadavg()[0]:.1f}; "
                  f"{args.trials} trials over {', '.join(kinds)}", flush=True)
            trials = fuzz(server.dsn, kinds, args.trials, root, random.Random(args.seed))
            signalled = [t for t in trials if t.code is not None and not any(x.startswith("(finished") for x in t.left)]
            dirty = [t for t in signalled if t.left]
            soft = [t.exit_s for t in signalled if t.signum != signal.SIGKILL]
            hard = [t.exit_s for t in signalled if t.signum == signal.SIGKILL]
            print(f"\n{len(signalled)} trials signalled ({len(trials) - len(signalled)} finished first): "
                  f"{len(dirty)} left something behind (goal 0); slowest exit after INT/TERM "
                  f"{max(soft, default=float('nan')):.2f}s (goal < 2 s), after KILL until its last child was gone "
                  f"{max(hard, default=float('nan')):.2f}s; load {os.getloadavg()[0]:.1f}")
            for kind in kinds:
                mine = [t for t in signalled if t.kind == kind]
                slow = max((t.exit_s for t in mine if t.signum != signal.SIGKILL), default=float("nan"))
                print(f"  {kind:<12} {len(mine):3d} trials, {sum(bool(t.left) for t in mine)} dirty, "
                      f"slowest INT/TERM exit {slow:.2f}s")
            if not args.no_scan:
                scan(server.dsn, kinds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
