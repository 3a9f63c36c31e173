"""`claimcheck check FILE --engine locust --users N --processes P`: the same check on Locust, on this box.

Starts one Locust master and P Locust worker processes running claimcheck's locustfile
(`claimcheck locustfile` prints its path), all bound to 127.0.0.1 on a free port; the master seeds,
judges, prints the verdict and sets the exit code, which becomes this command's. On many hosts the
same two `locust` commands are run by hand (docs/locust.md).

Locust is an extra (`pip install 'pg-claimcheck[locust]'`): importing it monkey-patches the process
for gevent, so this module never imports it; the locustfile runs in Locust's own processes.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from pg_claimcheck import install_command
from pg_claimcheck.errors import Interrupted, UsageError
from pg_claimcheck.server import children, interrupts
from pg_claimcheck.server.interrupts import shielded
from pg_claimcheck.server.provision import DSN_ENV, MAX_CONNECTIONS, provide_server
from pg_claimcheck.server.session import RUN_ID_ENV, drop_run_schema, run_id_from_env
from pg_claimcheck.settings import positive

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
INSTALL_HINT = ("--engine locust needs Locust, which claimcheck ships as an extra: "
                f"{install_command('locust')} (or pip install locust), then run the command again")
CONNECTION_MARGIN = 10
"""Connections beyond one per user for a server we start: the master's, the sampler's, psql's."""
MAX_WORKERS_WAIT_S = 60
WORKER_EXIT_S = 10.0


def require_locust() -> None:
    if importlib.util.find_spec("locust") is None:
        raise UsageError(INSTALL_HINT)


MAX_USERS = 10_000
"""One connection each: past this a typo asks the server for more connections than it can hold."""
MAX_PROCESSES = 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_args(args: argparse.Namespace) -> None:
    positive("--users", args.users, maximum=MAX_USERS)
    positive("--processes", args.processes, maximum=MAX_PROCESSES)
    if args.faults or args.reap_every or args.search:
        raise UsageError("--engine locust does not run --faults, --reap-every or --search; use the fork driver "
                         "(the default engine) for those")


def locust_command(args: argparse.Namespace, port: int) -> list[str]:
    """The master's command line (the DSN travels in the environment, not in the process list)."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--master", "--headless",
           "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
           "--expect-workers", str(args.processes), "--expect-workers-max-wait", str(MAX_WORKERS_WAIT_S),
           "--users", str(args.users), "--spawn-rate", str(args.users), "--only-summary", "--loglevel", "WARNING",
           "--claim-file", args.strategy, "--jobs", str(args.jobs), "--batch", str(args.batch[0]),
           "--mode", args.mode[0], "--work-ms", str(args.work_ms), "--poll-ms", str(args.poll_ms),
           "--fail-rate", str(args.fail_rate), "--backoff-unit", str(args.backoff_unit),
           "--backoff-cap", str(args.backoff_cap)]
    for flag, value in (("--lease-seconds", args.lease_seconds), ("--claim-duration", args.duration),
                        ("--claims-per-user", args.claims_per_worker), ("--json-report", args.json)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd


def worker_command(port: int) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker", "--master-host", "127.0.0.1",
            "--master-port", str(port), "--loglevel", "WARNING"]


def run_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    require_locust()
    _check_args(args)
    with provide_server(args.dsn, args.pg, max_connections=max(MAX_CONNECTIONS, args.users + CONNECTION_MARGIN)) \
            as server:
        port = _free_port()
        run_id = run_id_from_env()  # the master's schema: ours to drop if we must stop it
        env = {**os.environ, DSN_ENV: server.dsn, RUN_ID_ENV: run_id}
        err.print(f"claimcheck: Locust master and {args.processes} worker process(es) on 127.0.0.1:{port}, "
                  f"{args.users} users", highlight=False)
        # Sessions of their own (children.start): the terminal's Ctrl-C is ours to handle (in Locust's greenlets
        # it printed tracebacks), and each dies with us if we are killed (the master's SIGTERM is a graceful
        # quit, which drops its schema; the workers have nothing to keep).
        started: list[subprocess.Popen] = []
        try:
            # Ctrl-C and SIGTERM wait until each is kept: one that came mid-fork was dropped by Python's at-fork
            # hooks, and the run went on to its end.
            with interrupts.deferred():
                master = children.start(locust_command(args, port), env=env)
                started.append(master)
            workers = []
            for _ in range(args.processes):
                with interrupts.deferred():
                    workers.append(children.start(worker_command(port), env=env, stdout=subprocess.DEVNULL,
                                                  dies_with=signal.SIGKILL))
                    started.append(workers[-1])
            code = master.wait()
            children.wait(workers, WORKER_EXIT_S)  # the master done, its workers quit on their own
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: stop Locust at once and drop the run's schema ourselves; a graceful quit of
            # the master waits on its users and prints its statistics.
            with shielded():
                children.stop(started, ask=None, within_s=0)
                drop_run_schema(server.dsn, run_id)
            raise Interrupted("interrupted: the Locust master and workers stopped") from None
        finally:
            children.stop(started, within_s=WORKER_EXIT_S)  # nothing left to stop after the interrupt's
    return code
