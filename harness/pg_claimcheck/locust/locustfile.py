"""claimcheck's locustfile: `locust -f "$(claimcheck locustfile)" ...` (see
docs/locust.md). One user = one claimer with its own connection (pg_claimcheck.locust.claimer);
the master (or a run without --master) seeds, judges and cleans up (pg_claimcheck.locust.master).

    locust -f "$(claimcheck locustfile)" --master --headless --expect-workers 3 \\
           --claim-file my_claim.sql --jobs 200000 --users 1200 --spawn-rate 200 --dsn postgresql://...
    locust -f "$(claimcheck locustfile)" --worker --master-host hostA

Workers need nothing but the master's address: the claim file's statements, the DSN and the
settings reach them with Locust's spawn message.
"""
from __future__ import annotations

import os
from typing import Any

import gevent
import psycopg
from locust import User, constant, events, task
from locust.exception import StopUser
from locust.runners import WorkerRunner

from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.locust.claimer import decode_plan, run_claimer
from pg_claimcheck.server.provision import DSN_ENV

_master: Any = None
"""The MasterRun of this process, when it is the master (or a local run)."""


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--claim-file",
                        help="the claim strategy: a .sql file in claimcheck's contract, or a built-in name")
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV), is_secret=True,
                   help=f"the PostgreSQL server to load (default ${DSN_ENV}); only the master needs it")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs seeded (default 20,000)")
    parser.add_argument("--batch", type=int, default=10, help="jobs per claim (default 10)")
    parser.add_argument("--mode", default="lease", choices=("lease", "lock"),
                   help="lease: claim+commit, work, complete; lock: all in one transaction (default lease)")
    parser.add_argument("--work-ms", default="0", help="work per job: 5, a range 1-10, or exp:5 (default 0)")
    parser.add_argument("--poll-ms", type=float, default=10.0, help="sleep after an empty claim (default 10)")
    parser.add_argument("--lease-seconds", type=float, default=300.0, help="lease written by the claim (default 300)")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="fraction of jobs failed and retried")
    parser.add_argument("--backoff-unit", type=float, default=10.0, help="seconds, unit * 2^attempts (default 10)")
    parser.add_argument("--backoff-cap", type=float, default=3600.0, help="seconds, the backoff's cap (default 3600)")
    parser.add_argument("--claim-duration", type=float, help="stop claiming after this many seconds (no drain)")
    parser.add_argument("--claims-per-user", type=int, help="stop each user after this many claim transactions")
    # Plain strings only: Locust forwards the master's options to its workers with msgpack.
    parser.add_argument("--json-report", help="write claimcheck's JSON report here (the HTML next to it)")
    # Set by the master in test_start; Locust forwards it to the workers with the spawn.
    parser.add_argument("--claimcheck-plan", default="", include_in_web_ui=False, help="(internal)")


@events.init.add_listener
def _init(environment: Any, **kwargs: Any) -> None:
    global _master
    if isinstance(environment.runner, WorkerRunner):
        return
    from pg_claimcheck.locust.master import MasterRun  # the master's side only

    options = environment.parsed_options
    if options is None or not options.claim_file:
        raise SystemExit("claimcheck: error: give --claim-file FILE.sql (or a built-in strategy name) to the "
                         "master; workers need only --worker --master-host HOST")
    try:
        _master = MasterRun(environment)
    except ClaimcheckError as exc:
        _exit_early(f"claimcheck: error: {exc}")


def _exit_early(message: str) -> None:
    import sys

    print(message, file=sys.stderr)
    raise SystemExit(2)


@events.test_start.add_listener
def _test_start(environment: Any, **kwargs: Any) -> None:
    if _master is None:
        return
    try:
        _master.setup()
    except (ClaimcheckError, psycopg.Error) as exc:
        # Users spawned anyway find no plan and stop at once; the quit ends the run with exit 2.
        _master.fail(str(exc).strip())
        _master.cleanup()
        gevent.spawn(environment.runner.quit)


@events.quitting.add_listener
def _quitting(environment: Any, **kwargs: Any) -> None:
    if _master is not None:
        _master.cleanup()


class Claimer(User):
    """One claimer: its own connection, the worker's claim / work / complete cycle until done."""

    wait_time = constant(0)

    @task
    def claim_until_done(self) -> None:
        plan_text = self.environment.parsed_options.claimcheck_plan
        if not plan_text:
            raise StopUser()  # the master failed before the spawn: nothing to claim from
        run_claimer(self.environment, decode_plan(plan_text))
        raise StopUser()
