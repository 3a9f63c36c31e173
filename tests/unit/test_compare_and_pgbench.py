"""compare's judgement and pgbench's script, from hand-built data."""

import pytest

from claimcheck.compare import compare, load_report
from claimcheck.errors import UsageError
from claimcheck.pgbench import build_script
from claimcheck.settings import RunSettings, WorkTime
from claimcheck.strategy import load_strategy


def doc(*runs):
    return {"runs": [dict(strategy=s, mode="lease", workers=w, batch=10, throughput_jobs_per_s=r, exactly_once=ok,
                          double_claimed_jobs=0 if ok else 5) for s, w, r, ok in runs]}


BASE = doc(("skip-locked", 8, 1000.0, True), ("naive", 8, 900.0, False), ("gone", 1, 10.0, True))


def test_same_report_does_not_regress():
    assert not compare(BASE, BASE).regressed


def test_verdict_true_to_false_regresses_but_false_to_true_does_not():
    diffs = compare(BASE, doc(("skip-locked", 8, 1000.0, False), ("naive", 8, 900.0, True))).diffs
    assert [d.status for d in diffs] == ["VERDICT REGRESSED", "ok", "gone"]


@pytest.mark.parametrize("rate,max_drop,regressed", [(790.0, 20, True), (810.0, 20, False), (790.0, 25, False),
                                                     (2000.0, 0, False)])
def test_throughput_drop_past_the_threshold_regresses(rate, max_drop, regressed):
    comparison = compare(BASE, doc(("skip-locked", 8, rate, True)), max_drop)
    assert comparison.regressed is regressed


def test_runs_match_on_strategy_mode_workers_and_batch():
    diffs = compare(BASE, doc(("skip-locked", 16, 10.0, False))).diffs
    assert [d.status for d in diffs] == ["new", "gone", "gone", "gone"]
    assert not compare(BASE, doc(("skip-locked", 16, 10.0, False))).regressed


@pytest.mark.parametrize("text,message", [("[1, 2]", "no list of runs"), ('{"runs": [{"strategy": "x"}]}', "lacks mode"),
                                          ("nope", "not JSON")])
def test_load_report_rejects_what_is_not_ours(tmp_path, text, message):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_report(path)


def test_pgbench_script_is_the_strategys_sql_with_variables():
    script = build_script(load_strategy("skip-locked"), RunSettings(workers=8, batch=3, work=WorkTime.parse("2")),
                          with_attempts=True)
    assert "%(" not in script and "LIMIT :batch" in script and "FOR UPDATE SKIP LOCKED" in script
    assert script.count("\\gset") == 1 and script.count("\\sleep 2000 us") == 3
    # One fenced completion per claimed job, each from the k-th element of the claim's arrays.
    assert script.count("attempts = (CAST(:cc_attempts AS int[]))") == 3
    assert "(CAST(:cc_ids AS bigint[]))[3]" in script and "BEGIN" not in script


def test_pgbench_script_in_lock_mode_is_one_transaction():
    script = build_script(load_strategy("for-update"), RunSettings(workers=2, batch=1, mode="lock"), True)
    assert script.splitlines()[2] == "BEGIN;" and script.rstrip().endswith("COMMIT;")


def test_fast_path_numbers_placeholders_by_first_use():
    from claimcheck.dialect import to_positional

    text, names = to_positional("UPDATE jobs SET w = %(worker)s WHERE id = %(id)s AND a = %(attempts)s "
                                "AND w2 = %(worker)s AND note LIKE 'x%%'")
    assert text == "UPDATE jobs SET w = $1 WHERE id = $2 AND a = $3 AND w2 = $1 AND note LIKE 'x%'"
    assert names == ("worker", "id", "attempts")
