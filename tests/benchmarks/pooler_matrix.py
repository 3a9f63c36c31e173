"""Every built-in and every field design, directly and behind a real PgBouncer in session, transaction
and statement mode (`--pooler pgbouncer:MODE --pool-size 2`), and through a statement pool given as
the DSN: its verdict, and the evidence of each
violation (the job, the workers, the backend pids their claims ran on), the server's errors, or why
it was refused (statement pooling: a design that needs a transaction block).

    .venv/bin/python tests/benchmarks/pooler_matrix.py [--dsn DSN] [--only NAME]

The field cases run with the settings of tests/field/test_field.py (its CASES), the built-ins with
4 workers, 400 jobs, batch 10, lease mode. Prints one markdown table; nothing is asserted.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

from pg_claimcheck.scenarios import CATALOG

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.errors import ClaimcheckError, UsageError
from pg_claimcheck.server.pgbouncer import PgBouncer, PoolerSpec
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings, WorkTime

ROOT = Path(__file__).parents[1]
MODES = (None, "session", "transaction", "statement", "statement as --dsn")
"""`statement as --dsn`: a PgBouncer in statement mode this script starts, handed over as the DSN, so
every connection goes through it (claimcheck's own setup too), not only the workers'."""
BUILTIN_SETTINGS = {"workers": 4, "jobs": 400}
POOL = 2


def field_cases() -> list[tuple[str, str, dict]]:
    spec = importlib.util.spec_from_file_location("test_field", ROOT / "field" / "test_field.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_field"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return [(case.id, str(ROOT / "field" / case.file), dict(case.settings)) for case in module.CASES]


def cell(server, strategy: str, settings: dict) -> str:
    settings = dict(settings)
    if "work" in settings:
        settings["work"] = WorkTime.parse(settings["work"])
    try:
        with run_schema(server) as (conn, run):
            result = run_strategy(conn, server, run, load_strategy(strategy), RunSettings(**settings))
    except UsageError as exc:  # refused before anything ran: its reason, without the advice after it
        return f"refused: {str(exc).split(': ', 1)[-1].split(', and statement pooling')[0][:160]}"
    except ClaimcheckError as exc:
        return f"error: {str(exc).splitlines()[0][:160]}"
    v = result.verdict
    errors = f"; server errors {dict(result.claim_errors)}" if result.claim_errors else ""
    if result.exactly_once:
        return f"exactly-once ({v.claims} claims{errors})"
    shown = ""
    if v.violations:
        first = v.violations[0]
        pids = sorted({c.backend_pid for c in first.claims if c.backend_pid is not None})
        shown = (f"; job {first.job}: {first.kind}, workers "
                 f"{', '.join(f'w{c.worker:02d}' for c in first.claims[:4])}"
                 + (f", backend{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))}" if pids else ""))
    return (f"VIOLATED ({v.double_claimed_jobs} double claimed, {v.stale_completion_violations} stale, "
            f"{v.over_claims} over-claims{shown}{errors})")


@contextmanager
def through(mode: str | None, dsn: str | None):
    """The server, with `--pooler pgbouncer:MODE` in front of its workers, or behind a statement pool."""
    if mode != "statement as --dsn":
        with provide_server(dsn=dsn, pooler=PoolerSpec(mode, POOL) if mode else None) as server:
            yield server
        return
    with provide_server(dsn=dsn) as upstream:
        bouncer = PgBouncer(upstream.dsn, PoolerSpec("statement"), POOL)
        bouncer.start()
        try:
            with provide_server(dsn=bouncer.dsn) as server:
                yield server
        finally:
            bouncer.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn")
    parser.add_argument("--only", help="run only designs whose name contains this")
    args = parser.parse_args()
    designs = [(name, name, BUILTIN_SETTINGS) for name in CATALOG] + field_cases()
    designs = [d for d in designs if not args.only or args.only in d[0]]
    print("| design | " + " | ".join(mode or "none" for mode in MODES) + " |\n" + "|---" * (len(MODES) + 1) + "|")
    rows = {name: [] for name, _, _ in designs}
    for mode in MODES:
        with through(mode, args.dsn) as server:
            for name, strategy, settings in designs:
                rows[name].append(cell(server, strategy, settings))
                print(f"  {name} / {mode or 'none'}: {rows[name][-1]}", file=sys.stderr, flush=True)
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
