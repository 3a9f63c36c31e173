"""Hand-built claimcheck reports that follow the published schema, for compare's and the HTML's tests."""
from __future__ import annotations

from pg_claimcheck.report import validation as report_schema


def run_object(strategy="skip-locked", workers=8, jobs_per_s=1000.0, ok=True, mode="lease", batch=10,
               rates=None, **changes) -> dict:
    """One run object; `rates` is the jobs/s of each repetition (the median becomes `throughput_jobs_per_s`)."""
    from pg_claimcheck.verdict.stats import spread

    rates = rates or [jobs_per_s]
    doubles = 0 if ok else 5
    run = {
        "strategy": strategy, "source": f"builtin:{strategy}", "isolation": "read committed", "expected": None,
        "workers": workers, "jobs": 1000, "batch": batch, "mode": mode, "work_ms": "1", "claims": 100 + doubles,
        "unique_jobs_claimed": 100, "double_claimed_jobs": doubles, "extra_claims": doubles, "unclaimed_jobs": 0,
        "unexpected_jobs": 0, "stale_completions": 0, "jobs_done": 100, "jobs_failed": 0, "max_attempts": 5,
        "serialization_failures": 0, "deadlocks": 0, "claim_statements": 10, "empty_claims": 0, "elapsed_s": 0.1,
        "throughput_jobs_per_s": spread(rates)["median"], "throughput": spread(rates),
        "repetitions": [{"throughput_jobs_per_s": r, "elapsed_s": 0.1, "jobs_done": 100, "double_claimed_jobs": doubles,
                         "exactly_once": ok, "claim_p95_ms": 2.0} for r in rates],
        "claim_latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0}, "wait_events": {},
        "wait_samples": 4, "wait_sample_interval_s": 0.05, "max_waiting_workers": 0, "stopped_by": "drained",
        "seed_seconds": 0.01, "exactly_once": ok, "violations": [], "pgbench_jobs_per_s": None,
        "pgbench_ratio": None, "pgbench": None, "claims_over_time": {},
    }
    run.update(changes)
    return run


def report(*runs, version="16.4", **settings) -> dict:
    return {"schema_version": 1, "tool": {"name": "claimcheck", "version": "0.1.0", "command": "claimcheck bench"},
            "created_at": "2026-01-01T00:00:00Z", "machine": {"platform": "Linux", "python": "3.11"},
            "postgres": {"version": version, "version_num": 160004, "source": "dsn"},
            "settings": {"jobs": 1000, "work_ms": "1", **settings}, "runs": list(runs)}


def assert_valid_report(doc: dict, where: str = "report") -> None:
    """Validate against the published schema, with the validator `compare` uses (`jsonschema`)."""
    problems = list(report_schema.errors(doc))
    assert not problems, f"{where} breaks report.schema.json: {problems[:5]}"


def schema_accepts(doc) -> bool:
    return report_schema.validator().is_valid(doc)
