"""The JSON document built from results follows the published schema; repetitions are kept and summarised."""
import dataclasses

from test_report import log, result

from pg_claimcheck.app.bench import representative
from pg_claimcheck.report import validation as report_schema
from pg_claimcheck.report.render import document
from pg_claimcheck.server.provision import Server
from sample_reports import assert_valid_report

SERVER = Server(dsn="postgresql://x@127.0.0.1/db", source="dsn", version="16.4", version_num=160004)


def clean(elapsed_s: float):
    run = result("skip-locked", [log(0, (1, 1, 0.1, 0.2), (2, 1, 0.1, 0.2)), log(1, (3, 1, 0.1, 0.2))], "safe")
    return dataclasses.replace(run, elapsed_s=elapsed_s)


def dirty():
    return result("skip-locked", [log(0, (1, 1, 0.1, 0.5), (2, 1, 0.1, 0.2), (3, 1, 0.1, 0.2)),
                                     log(1, (1, 2, 0.3, 0.6))], "unsafe")


def test_documents_follow_the_schema_with_and_without_repetitions():
    single = document(SERVER, [clean(0.5), dirty()], "claimcheck bench", {"jobs": 3})
    repeated = document(SERVER, [representative((clean(0.5), clean(1.0), clean(0.25)))], "claimcheck bench", {})
    for doc in (single, repeated):
        assert_valid_report(doc)
        assert not list(report_schema.errors(doc))
    assert single["schema_version"] == report_schema.SCHEMA_VERSION
    assert single["runs"][0]["repetitions"] == [{"throughput_jobs_per_s": 6.0, "elapsed_s": 0.5, "jobs_done": 3,
                                                 "double_claimed_jobs": 0, "exactly_once": True, "claim_p95_ms": 2.5}]


def test_repetitions_median_spread_and_the_representative():
    run = representative((clean(0.5), clean(1.0), clean(0.25)))  # 6, 3 and 12 jobs/s
    assert run.elapsed_s == 0.5  # the one nearest the median stands for them
    as_json = run.as_dict()
    assert as_json["throughput"] == {"n": 3, "median": 6.0, "min": 3.0, "max": 12.0, "mad": 3.0}
    assert as_json["throughput_jobs_per_s"] == 6.0 and as_json["exactly_once"]


def test_one_violated_repetition_makes_the_run_violated_and_carries_the_evidence():
    run = representative((clean(0.5), dirty(), clean(0.25)))
    assert not run.exactly_once and run.verdict.double_claimed_jobs == 1
    assert not run.as_dict()["exactly_once"] and run.as_dict()["violations"]
