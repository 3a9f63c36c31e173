"""Options and output shared by the verbs."""
from __future__ import annotations

import argparse
import itertools
import os
import tempfile
from pathlib import Path

from rich.console import Console

from pg_claimcheck.errors import UsageError
from pg_claimcheck.report import publish
from pg_claimcheck.report.render import REPORTS_DIR
from pg_claimcheck.server.pgbouncer import PoolerSpec
from pg_claimcheck.server.provision import DSN_ENV, Server, provide_server
from pg_claimcheck.server.redaction import redact_dsn
from pg_claimcheck.settings import FaultPlan, RunSettings, WorkTime
from pg_claimcheck.verdict.result import RunResult


def _numbers(text: str, kind, what: str) -> list:
    """A comma-separated list of `kind` numbers; never empty (an empty list would run nothing, and report
    that as a success), and no item empty (`100,,200` is a typo, of a number left out or one too many commas)."""
    try:
        values = [kind(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values:
        empty = " (an empty item: a number left out, or a comma too many)" if "," in text else ""
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}{empty}")
    return values


def int_list(text: str) -> list[int]:
    return _numbers(text, int, "a number or a comma-separated list of numbers")


def rate_list(text: str) -> list[float]:
    """`bench --rate 200,500,1000`: offered rates, ascending and each once (a knee is read from low to high)."""
    return sorted(set(_numbers(text, float, "a rate or a comma-separated list of rates (jobs/s)")))


def str_list(text: str) -> list[str]:
    values = [x.strip() for x in text.split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected a name or a comma-separated list of names, got {text!r}")
    return values


def one(parse):
    """An option of a verb that judges one setting (`check`): one value, kept as a list of one like
    a sweep's, so the grid is built the same way; a comma list is refused, not silently swept."""
    def single(text: str) -> list:
        values = parse(text)
        if len(values) != 1:
            raise argparse.ArgumentTypeError(f"expected one value, got {text!r}; check judges one setting "
                                             "(bench sweeps comma lists)")
        return values
    return single


def add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--dsn", help=f"connect to this server and start nothing (default: ${DSN_ENV})")
    g.add_argument("--pg", metavar="KIND", help="start a server: embedded (default, PostgreSQL 18), embedded:16, "
                                                "system (the machine's pg_ctl), docker:VERSION")
    g.add_argument("--pooler", metavar="pgbouncer[:MODE]",
                   help="start a PgBouncer (transaction mode, or :session, :statement) in front of the server and "
                        "connect the workers through it; a --dsn that reaches a pooler is found by behaviour without "
                        "this (see docs/poolers.md)")
    g.add_argument("--pool-size", type=int, metavar="N",
                   help="--pooler: server connections in its pool (default: half the fewest workers, at least 1)")


def refuse_pooler(args: argparse.Namespace, what: str, why: str = "runs its sessions on direct connections",
                  server: Server | None = None) -> None:
    """A verb (or engine) whose sessions must be the server's own says so, `what` it is and `why`, instead of
    ignoring --pooler (asked before its server is provided) or a pooler found in front of --dsn (with `server`)."""
    if server is None and args.pooler is not None:
        raise UsageError(f"{what} {why}; --pooler is for the others' load runs. Nothing was run: leave --pooler out")
    if server is not None and server.pooler is not None:
        raise UsageError(f"{redact_dsn(server.dsn)} goes through a pooler ({server.pooler.evidence}); {what} {why}. "
                         "Nothing was run: point --dsn at the server itself")


def refuse_combined(what: str, given: tuple[tuple[str, object], ...]) -> None:
    """`what` (an option, and what it runs) beside any option of `given` ((its words, whether it was
    given), each) that it cannot run with: refused, naming each of those given."""
    mixed = [words for words, on in given if on]
    if mixed:
        raise UsageError(f"{what}: it does not combine with {', '.join(mixed)}")


def provide(args: argparse.Namespace, **kwargs):
    """The verb's server (provision.provide_server) from its --dsn, --pg, --pooler and --pool-size."""
    # `is not None`: an empty --pooler "" (an unset variable in a script) is refused, not a run without one.
    pooler = PoolerSpec.parse(args.pooler, args.pool_size) if args.pooler is not None else None
    if pooler is None and args.pool_size is not None:
        raise UsageError("--pool-size sizes the pool of --pooler; give --pooler pgbouncer too")
    workers = getattr(args, "workers", None)  # a list (check's of one); the probes have no --workers
    return provide_server(args.dsn, args.pg, pooler=pooler, workers=min(workers) if workers else None, **kwargs)


def check_writable(path: Path | None) -> None:
    """A --json path that cannot be written is said before the run, not after it. No directory the
    user did not name is created, so the file's directory must exist already."""
    if path is None:
        return
    parent = path.parent
    if path.is_dir():
        raise UsageError(f"--json {path}: is a directory; name a file")
    if not parent.is_dir():
        raise UsageError(f"--json {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--json {path}: not writable here")
    # Permission bits do not say everything (root may write anywhere by them, yet not create a file
    # in /proc or on a read-only mount): try it. A file that was not there is removed again.
    try:
        if path.exists():
            with open(path, "a"):
                pass
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            path.unlink()
    except OSError as exc:
        raise UsageError(f"--json {path}: cannot be written ({exc.strerror or exc}); name a file in a "
                         "writable directory") from None


def check_reports_dir() -> None:
    """A verb that always writes its reports puts them in REPORTS_DIR under the current directory when
    no --json is given: one that cannot be made or written there (a read-only checkout) is said before
    the run, not as a raw OSError after every strategy ran."""
    try:
        REPORTS_DIR.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=REPORTS_DIR, prefix=".claimcheck-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"the reports go to {REPORTS_DIR}/ under the current directory ({Path.cwd()}) without "
                         f"--json, and it cannot be written there ({exc.strerror or exc}); give --json PATH in a "
                         "writable directory") from None


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", type=Path, help="write the JSON report here")


def add_run_options(p: argparse.ArgumentParser, *, workers: str, jobs: int | None, modes: str, work_ms: str,
                    faults: bool, reports: bool, sweeps: bool = True, jobs_help: str | None = None) -> None:
    """The load and lifecycle options of check, bench and faults. `faults`: the verb injects faults
    (so defaults that change under them are worded so); `reports`: it always writes its reports;
    `sweeps`: --workers, --batch and --mode take comma lists (bench, faults), else one value (check).
    `jobs` None: the verb sizes its runs itself (check's time budget), `jobs_help` says how."""
    g = p.add_argument_group("load")
    ints, strs = (int_list, str_list) if sweeps else (one(int_list), one(str_list))
    g.add_argument("--workers", type=ints, default=int_list(workers),
                   help=f"worker processes{', or a comma list to sweep' if sweeps else ''} (default {workers})")
    g.add_argument("--jobs", type=int, default=jobs, help=jobs_help or f"jobs seeded per run (default {jobs:,})")
    g.add_argument("--batch", type=ints, default=[10],
                   help=f"jobs per claim{', or a comma list' if sweeps else ''} (default 10)")
    g.add_argument("--mode", type=strs, default=str_list(modes),
                   help="lease: claim+commit, work outside, complete in a second transaction; "
                        "lock: claim, work and complete in one transaction"
                        f"{'; a comma list runs both' if sweeps else ''} (default {modes})")
    g.add_argument("--work-ms", default=work_ms, help=f"work per job: 5, a range 1-10, or exp:5 (default {work_ms})")
    g.add_argument("--poll-ms", type=float, default=10.0, help="sleep after an empty claim (default 10)")
    g.add_argument("--lease-seconds", type=float, help="lease written by the claim (default 300"
                   + ("; 2 with faults)" if faults else ")"))
    g.add_argument("--duration", type=float, help="stop after this many seconds even if jobs remain")
    g.add_argument("--claims-per-worker", type=int, help="stop each worker after this many claim transactions "
                                                         "(like pgbench -t)")
    if reports:
        p.set_defaults(writes_reports=True)  # REPORTS_DIR is checked before the run (check_reports_dir)
        g.add_argument("--json", type=Path, metavar="PATH",
                       help=f"write the JSON report here, and the HTML report next to it (default: "
                            f"{REPORTS_DIR}/{p.prog.split()[-1]}-TIME.json under the current directory, created if needed)")
    else:
        add_json_option(g)
    add_wide_option(g)
    life = p.add_argument_group("lifecycle (retries, leases, reaper)")
    life.add_argument("--fail-rate", type=float, default=0.0,
                      help="fraction of jobs failed by their worker and retried with the strategy's backoff")
    life.add_argument("--backoff-unit", type=float, default=10.0,
                      help="seconds: a failed job waits unit * 2^attempts (default 10, the seed's 20 s first retry)")
    life.add_argument("--backoff-cap", type=float, default=3600.0, help="seconds, the backoff's cap (default 3600)")
    life.add_argument("--reap-every", type=float,
                      help="run the reaper (expired leases back to the queue) every N seconds (default: off"
                           + ("; 0.5 with faults)" if faults else ")"))


FAULT_LEASE_S = 2.0
FAULT_REAP_EVERY_S = 0.5
DEFAULT_LEASE_S = 300.0


def settings_grid(args: argparse.Namespace, faults: FaultPlan | None = None,
                  stop_early: bool = False) -> list[RunSettings]:
    """Every mode x workers x batch of the command line. Faults need short leases and a reaper,
    so they default to FAULT_LEASE_S and FAULT_REAP_EVERY_S unless given."""
    work = WorkTime.parse(args.work_ms)
    # `is None`, not `or`: an explicit 0 must reach RunSettings' check and be refused, not replaced.
    lease = args.lease_seconds if args.lease_seconds is not None else (FAULT_LEASE_S if faults else DEFAULT_LEASE_S)
    reap = args.reap_every if args.reap_every is not None else (FAULT_REAP_EVERY_S if faults else None)
    # With --rate, --duration is the producer's: the workers drain after it (see pg_claimcheck.engine.producer).
    # check's --rate is one rate, bench's a list (a sweep: the rates innermost, so each setting's run ascending).
    rate = getattr(args, "rate", None)
    duration, produce = (None, args.duration) if rate is not None else (args.duration, None)
    rates = rate if isinstance(rate, list) else [rate]
    return [RunSettings(workers=w, jobs=args.jobs, batch=b, mode=m, work=work, poll_ms=args.poll_ms,
                        lease_seconds=lease, duration_s=duration, claims_per_worker=args.claims_per_worker,
                        rate_per_s=r, produce_s=produce, producers=getattr(args, "producers", 1),
                        wakeup=getattr(args, "wakeup", "poll"),
                        fail_rate=args.fail_rate, backoff_unit_s=args.backoff_unit, backoff_cap_s=args.backoff_cap,
                        reap_every_s=reap, faults=faults, stop_early=stop_early)
            for m, w, b, r in itertools.product(args.mode, args.workers, args.batch, rates)]


def add_producers_option(g) -> None:
    """`--producers`, for the verbs that feed the queue at a --rate (check, and bench's sweeps)."""
    g.add_argument("--producers", type=int, default=1,
                   help="with --rate: this many producer processes share the schedule (job i is producer i mod N's, "
                        "each keeping its own due time), default 1; one producer's own ceiling (1,300-1,500 jobs/s "
                        "on 2 cores) is not a strategy's knee")


def add_wide_option(g) -> None:
    g.add_argument("--wide", action="store_true",
                   help="show every column of the results table (the default fits 80 columns; a pipe gets every column)")


def report_runs(server: Server, results: list[RunResult], args: argparse.Namespace, console: Console,
                verb: str, title: str, always_write: bool, evidence: int, command: str | None = None,
                plans=None, knees=None, budget=None, scoreboard: dict | None = None) -> dict:
    """A verb's runs, printed and written as its command line asks (see pg_claimcheck.report.publish); the
    JSON document, whose runs the verb's conclusion reads (publish.print_conclusion)."""
    return publish.report_runs(server, results, console, verb=verb, title=title, settings=publish.plain_settings(vars(args)),
                        json_path=args.json, wide=args.wide, always_write=always_write, evidence=evidence,
                        command=command, plans=plans, knees=knees, budget=budget, scoreboard=scoreboard)
