"""The Locust master's side of a claim run: seed, collect the users' records, judge, clean up.

Runs in the process that owns the run (Locust's master, or its local runner without --master):

1. `test_start` (before Locust sends the spawn to its workers): the run's schema and seeded table,
   the strategy validated on the server, and the plan (DSN, schema, strategy, settings) put into a
   custom option, which Locust forwards to every worker with the spawn message.
2. Each user streams its records with `runner.send_message`; they are merged here into one
   :class:`pg_claimcheck.verdict.ledger.WorkerLog` per user, exactly as the fork driver merges its pipes.
3. When every user that started has ended, or its worker process is gone (Locust's heartbeat
   missed and none of its users' connections left on the server),
   the records are judged as the fork driver's are (a `pg_claimcheck.engine.judge.RunRecord` handed to
   `judge_run`: the same ledger, table outcome and unrecorded-claims rule), the same table, JSON and HTML are written,
   the exit code is set (0 held / 1 violated / 2 not judged) and Locust is told to quit.
4. `quitting` (however the run ends: finished, Ctrl-C, an error): the run's own backends are
   ended and its schema dropped.
"""
from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import psycopg
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner
from rich.console import Console

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import check_fail_rate, seed, validate
from pg_claimcheck.engine.judge import RunRecord, RunTable, judge_run
from pg_claimcheck.engine.logstream import LogDelta, apply_summary
from pg_claimcheck.engine.sampler import LockWaitSampler, WaitSamples
from pg_claimcheck.engine.supervisor import TICK_S, Supervisor, check_headroom, drained
from pg_claimcheck.engine.worker import WorkerPlan, worker_role
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.locust.claimer import END_MESSAGE, LOG_MESSAGE, START_MESSAGE, LocustSettings, encode_plan
from pg_claimcheck.report.publish import plain_settings, report_console, report_runs
from pg_claimcheck.report.render import print_server
from pg_claimcheck.server.provision import Server, server_version
from pg_claimcheck.server.redaction import redact_dsn
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.session import run_id_from_env, run_schema
from pg_claimcheck.settings import StopReason, WorkTime
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

EVIDENCE_JOBS = 5


def settings_from(options: Any) -> LocustSettings:
    """The run's settings from the locustfile's options (Locust's --users is the claimer count)."""
    return LocustSettings(
        workers=options.num_users or 1, jobs=options.jobs, batch=options.batch, mode=options.mode,
        work=WorkTime.parse(options.work_ms), poll_ms=options.poll_ms, lease_seconds=options.lease_seconds,
        duration_s=options.claim_duration, claims_per_worker=options.claims_per_user, fail_rate=options.fail_rate,
        backoff_unit_s=options.backoff_unit, backoff_cap_s=options.backoff_cap)


class MasterRun:
    """One claim run seen from the master: its schema, its users' logs, its verdict and exit code."""

    def __init__(self, environment: Any) -> None:
        self.env = environment
        self.options = environment.parsed_options
        self.console, self.err = report_console(), Console(stderr=True)  # as the CLI's: a pipe gets every column
        self.strategy = load_strategy(self.options.claim_file)
        self.settings = settings_from(self.options)
        check_fail_rate(self.strategy, self.settings)
        version, num = server_version(self.options.dsn)
        self.server = Server(dsn=self.options.dsn, source="dsn", version=version, version_num=num)
        self.run_id = run_id_from_env()  # $CLAIMCHECK_RUN_ID names the schema
        self.run: RunContext | None = None
        """The run's context, once setup made its schema."""
        self.cleanup_stack = contextlib.ExitStack()
        self.conn: psycopg.Connection | None = None
        self.sampler: LockWaitSampler | None = None
        self.logs: dict[int, WorkerLog] = {}
        self.telemetry: dict[int, WorkerTelemetry] = {}
        self.node_of: dict[int, str] = {}
        self.ended: set[int] = set()
        self.news = 0
        """Messages from the users so far: the supervisor's sign of activity (a claim, an end)."""
        self.supervisor = Supervisor(self.settings, time.monotonic())
        self.judged = False
        self.watcher: gevent.Greenlet | None = None
        """The greenlet that ends and judges the run; killed first on the way out (it reads self.conn)."""
        runner = environment.runner
        for kind, handler in ((START_MESSAGE, self._on_start), (LOG_MESSAGE, self._on_log),
                              (END_MESSAGE, self._on_end)):
            runner.register_message(kind, handler)

    # -- 1. before the spawn ----------------------------------------------------------------------
    def setup(self) -> None:
        print_server(self.err, self.server)
        # The same schema lifecycle as the fork driver's (owner record, sweep of a dead run's
        # leftovers, drop of only what this run created), closed in cleanup().
        self.conn, self.run = self.cleanup_stack.enter_context(run_schema(self.server, run_id=self.run_id))
        self.seeded = seed(self.conn, self.run, self.strategy, self.settings.jobs)
        shape = validate(self.run, self.strategy)
        check_headroom(self.conn, self.settings.workers + 1, who="one per user and the sampler", lower="--users")
        self.plan = plan = WorkerPlan(run=self.run, strategy=self.strategy, settings=self.settings, shape=shape,
                                      keys=self.seeded.keys)
        self.options.claimcheck_plan = encode_plan(plan)
        self.sampler = LockWaitSampler(self.run)
        self.sampler.start()
        self.err.print(f"claimcheck: {self.strategy.name} · {self.settings.mode} · {self.settings.workers} users · "
                       f"{self.settings.jobs:,} jobs seeded in schema {self.run.schema}", highlight=False, soft_wrap=True)
        self.watcher = gevent.spawn(self._watch)

    # -- 2. the users' records --------------------------------------------------------------------
    def _log(self, user: int) -> WorkerLog:
        return self.logs.setdefault(user, WorkerLog(worker=user))

    def _telemetry(self, user: int) -> WorkerTelemetry:
        return self.telemetry.setdefault(user, WorkerTelemetry(worker=user))

    def _on_start(self, environment: Any, msg: Any, **kwargs: Any) -> None:
        self.node_of[msg.data["user"]] = msg.node_id
        self._log(msg.data["user"])
        self._telemetry(msg.data["user"]).started_at = msg.data["started_at"]
        self.news += 1

    def _on_log(self, environment: Any, msg: Any, **kwargs: Any) -> None:
        LogDelta.from_wire(msg.data["delta"]).merge_into(self._log(msg.data["user"]))
        self.news += 1

    def _on_end(self, environment: Any, msg: Any, **kwargs: Any) -> None:
        user = msg.data["user"]
        self.node_of.setdefault(user, msg.node_id)
        self._log(user)
        apply_summary(self._telemetry(user), msg.data["summary"])
        self.ended.add(user)
        self.news += 1

    # -- 3. the end of the run and the verdict ----------------------------------------------------
    def _missing_nodes(self) -> set[str]:
        clients = getattr(self.env.runner, "clients", None)
        return {c.id for c in clients.missing} if clients is not None else set()

    def _lost_users(self) -> set[int]:
        """Users whose worker process is gone: Locust's heartbeat says it went missing AND the server
        shows none of their connections. A busy process's late heartbeat is not a death, and a killed
        process's connections are closed by its kernel, so the server is the witness."""
        missing = self._missing_nodes()
        suspects = {u for u, node in self.node_of.items() if node in missing and u not in self.ended}
        if not suspects:
            return set()
        names = {self.run.app_name(worker_role(u)): u for u in suspects}
        alive = self.conn.execute(QUERIES["connected_applications"], {"names": list(names)}).fetchall()
        return suspects - {names[name] for (name,) in alive}

    def _state(self) -> tuple[set[int], StopReason | None]:
        """(users lost with their worker process, why the run stopped: None while it goes on)."""
        lost = self._lost_users()
        running = set(self.node_of) - self.ended - lost
        target = self.env.runner.target_user_count or self.settings.workers
        if not running and (len(self.node_of) >= target or lost):
            return lost, self.settings.limit_kind
        now = time.monotonic()
        self.supervisor.saw(now, self.news)
        if self.supervisor.stalled(now):  # its --duration the users keep themselves (see run_claimer)
            return lost | running, StopReason.STALLED
        return lost, None

    def _watch(self) -> None:
        try:
            while True:
                gevent.sleep(TICK_S)
                lost, stopped_by = self._state()
                if stopped_by is not None:
                    break
            self.env.process_exit_code = self._judge(lost, stopped_by)
        except ClaimcheckError as exc:
            self.fail(str(exc))
        except psycopg.Error as exc:
            self.fail(f"PostgreSQL: {str(exc).strip()}. Nothing was judged")
        if isinstance(self.env.runner, MasterRunner):
            # Workers send Locust's request statistics every WORKER_REPORT_INTERVAL: wait for the
            # last ones, so that Locust's summary counts every claim the ledger judged.
            gevent.sleep(WORKER_REPORT_INTERVAL + 0.5)
        self.env.runner.quit()

    def _judge(self, lost: set[int], stopped_by: StopReason) -> int:
        waits = self.sampler.stop() if self.sampler else WaitSamples()
        self.sampler = None
        now = self.conn.execute(QUERIES["server_clock"]).fetchone()[0]
        for user in lost:  # like the fork driver's dead worker: its log ends where its stream did
            self._telemetry(user).finished_at = now
        logs = [self.logs[u] for u in sorted(self.logs)]
        telemetry = [self._telemetry(u) for u in sorted(self.logs)]
        errors = [t.error for t in telemetry if t.error]
        if errors:
            raise ClaimcheckError(f"a claimer failed mid-run, so the run is not judged: {errors[0]}")
        if not any(t.started_at for t in telemetry):
            raise ClaimcheckError("no Locust user started claiming; is a worker connected to this master?")
        # No faults, no reaper; the master's CPU is Locust's, not a run's (coordinator_cpu_s None).
        record = RunRecord.of(logs, telemetry, stopped_by, drained(stopped_by, self.settings), killed=lost, waits=waits)
        result = judge_run(record, RunTable(self.conn, self.strategy, unreaped=True), self.strategy, self.settings,
                           self.seeded, releases=self.plan.releases)
        if lost:
            nodes = {self.node_of[u] for u in lost}
            self.err.print(f"claimcheck: {len(nodes)} Locust worker process(es) went missing mid-run (no "
                           f"heartbeat, no connection left): the claims their {len(lost)} users had streamed "
                           "are judged; "
                           f"{result.verdict.unrecorded_claims} unrecorded claims (jobs the table shows claimed "
                           "that no streamed record names) count as claimed, not lost", highlight=False,
                           soft_wrap=True)
        o = self.options
        report_runs(self.server, [result], self.console, verb="check",
                    title=f"claimcheck check {self.strategy.name} on Locust: PostgreSQL {self.server.version}",
                    settings=plain_settings(self._report_settings()),
                    json_path=Path(o.json_report) if o.json_report else None,
                    wide=False,  # a terminal gets the compact table
                    always_write=False, evidence=EVIDENCE_JOBS, command=self._command())
        held = result.exactly_once
        self.console.print("[bold green]exactly-once held[/]" if held else "[bold red]exactly-once violated[/]")
        self.judged = True
        return 0 if held else 1

    def _report_settings(self) -> dict:
        o = self.options
        return {"engine": "locust", "strategy": o.claim_file, "users": o.num_users, "jobs": o.jobs,
                "batch": o.batch, "mode": o.mode, "work_ms": o.work_ms, "poll_ms": o.poll_ms,
                "lease_seconds": o.lease_seconds, "fail_rate": o.fail_rate, "duration": o.claim_duration,
                "claims_per_user": o.claims_per_user, "dsn": redact_dsn(o.dsn)}

    def _command(self) -> str:
        return " ".join(["locust", *(redact_dsn(a) if a.startswith("postgres") else a for a in sys.argv[1:])])

    def fail(self, message: str) -> None:
        """Not judged: one paragraph on stderr, exit code 2."""
        self.err.print(f"claimcheck: error: {message}", highlight=False, markup=False)
        self.env.process_exit_code = 2

    # -- 4. however the run ends ------------------------------------------------------------------
    def cleanup(self) -> None:
        if not self.judged and self.env.process_exit_code is None:
            self.err.print("claimcheck: the run ended before it was judged (interrupted?); schema dropped",
                           highlight=False)
            self.env.process_exit_code = 2
        if self.watcher is not None and not self.watcher.dead:  # a quit before the verdict (SIGTERM)
            self.watcher.kill()
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None
        # Closing run_schema ends the run's remaining connections (users on other hosts may still
        # hold transactions on the run's table) and drops the schema.
        self.conn = None
        self.cleanup_stack.close()

