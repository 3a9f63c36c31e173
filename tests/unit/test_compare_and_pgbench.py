"""compare's judgement and pgbench's script, from hand-built data."""
import math

import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.pgbench import build_script
from pg_claimcheck.errors import UsageError
from pg_claimcheck.report.compare import compare
from pg_claimcheck.report.reader import load_report
from pg_claimcheck.settings import RunSettings, WorkTime
from pg_claimcheck.verdict.stats import mann_whitney_less, spread
from sample_reports import assert_valid_report, report, run_object


def doc(*runs):
    return report(*(run_object(s, w, r, ok) for s, w, r, ok in runs))


BASE = doc(("skip-locked", 8, 1000.0, True), ("naive", 8, 900.0, False), ("gone", 1, 10.0, True))


def test_hand_built_reports_follow_the_schema():
    assert_valid_report(BASE)


def test_same_report_does_not_regress():
    assert not compare(BASE, BASE).regressed


def test_verdict_true_to_false_regresses_but_false_to_true_does_not():
    diffs = compare(BASE, doc(("skip-locked", 8, 1000.0, False), ("naive", 8, 900.0, True))).diffs
    assert [d.status for d in diffs] == ["VERDICT REGRESSED", "ok", "gone"]


@pytest.mark.parametrize("rate,max_drop,regressed", [(790.0, 20, True), (810.0, 20, False), (790.0, 25, False),
                                                     (2000.0, 0, False)])
def test_one_sample_each_the_threshold_alone_judges_and_says_so(rate, max_drop, regressed):
    comparison = compare(BASE, doc(("skip-locked", 8, rate, True)), max_drop)
    assert comparison.regressed is regressed
    assert any("too few repetitions" in w for w in comparison.warnings)


NOISY = [1000.0, 1430.0, 700.0, 2140.0, 950.0]


def test_a_drop_past_the_threshold_that_is_noise_is_not_a_regression():
    base = report(run_object(rates=NOISY))
    new = report(run_object(rates=[760.0, 1500.0, 690.0, 2000.0, 720.0]))  # median -24 %, overlapping
    diff = compare(base, new).diffs[0]
    assert diff.past_threshold and diff.p_value > 0.05 and diff.status == "ok (within noise)"
    assert not compare(base, new).regressed and not compare(base, new).warnings


def test_four_repetitions_a_side_cannot_reach_the_default_alpha_so_the_threshold_judges():
    base = report(run_object(rates=[1000.0, 1010.0, 990.0, 1005.0]))
    new = report(run_object(rates=[500.0, 520.0, 480.0, 510.0]))
    comparison = compare(base, new)
    assert comparison.diffs[0].p_value is None and comparison.regressed  # 1/C(8,4) = 0.014 > 0.01
    assert any("too few repetitions" in w for w in comparison.warnings)
    assert compare(base, new, alpha=0.05).diffs[0].p_value == pytest.approx(1 / 70)


def test_a_drop_past_the_threshold_that_is_significant_regresses():
    base = report(run_object(rates=[1000.0, 1010.0, 990.0, 1005.0, 995.0]))
    new = report(run_object(rates=[500.0, 520.0, 480.0, 510.0, 490.0]))
    diff = compare(base, new).diffs[0]
    assert diff.p_value == pytest.approx(1 / 252) and diff.status == "SLOWER"


def test_mann_whitney_exact_and_approximate_agree_in_direction():
    assert mann_whitney_less([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(1 / 252)
    assert mann_whitney_less([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == 1.0
    low, high = list(range(20)), list(range(10, 30))  # 20+20: the normal approximation
    assert mann_whitney_less(low, high) < 0.01 < 0.99 < mann_whitney_less(high, low)
    assert spread([1, 2, 3, 10]) == {"n": 4, "median": 2.5, "min": 1, "max": 10, "mad": 1.0}


def test_different_servers_and_settings_are_warned_about():
    new = report(run_object(), version="17.2", work_ms="2")
    new["machine"].update(cpus=2, load_average_1m=6.5)
    base = report(run_object())
    base["machine"].update(cpus=2, load_average_1m=0.5)
    warnings = " ".join(compare(base, new).warnings)
    assert "16.4 → 17.2" in warnings and "work_ms '1' → '2'" in warnings and "load average 0.5 → 6.5" in warnings


def test_runs_match_on_strategy_mode_workers_and_batch():
    diffs = compare(BASE, doc(("skip-locked", 16, 10.0, False), ("naive", 8, 900.0, False))).diffs
    assert [d.status for d in diffs] == ["new", "ok", "gone", "gone"]


def test_a_planner_condition_that_newly_fails_regresses_and_its_jobs_per_s_never_judges():
    """A base without conditions (schema version 1, or --plans none) is the as-seeded run of one with them."""
    held, stale = run_object("skip-locked", 8, 1000.0, True), run_object("skip-locked", 4, 5.0, True)
    new = report(run_object("skip-locked", 8, 1000.0, True, condition="as-seeded"),
                 run_object("skip-locked", 8, 1.0, True, condition="generic-plan"),
                 run_object("skip-locked", 8, 10.0, False, condition="stale-stats"))
    new["schema_version"] = 2
    assert_valid_report(new)
    comparison = compare(report(held, stale), new)
    assert [d.status for d in comparison.diffs][:3] == ["ok", "new", "NEWLY FAILS"]
    assert [d.key[4] for d in comparison.regressions] == ["stale-stats"]
    slower = report(run_object("skip-locked", 8, 1000.0, True, condition="generic-plan"))
    assert not compare(slower, report(run_object("skip-locked", 8, 1.0, True, condition="generic-plan"))).regressed


@pytest.mark.parametrize("new,message", [(doc(), "the new report has no runs"),
                                         (doc(("other", 8, 10.0, True)), "no run of the new report matches")])
def test_comparisons_that_share_no_run_are_unusable(new, message):
    with pytest.raises(UsageError, match=message):
        compare(BASE, new)


@pytest.mark.parametrize("max_drop", [math.nan, math.inf, -1.0, 101.0])
def test_max_drop_out_of_range_is_refused(max_drop):
    with pytest.raises(UsageError, match="--max-drop"):
        compare(BASE, BASE, max_drop)


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "no list of runs"), ("nope", "not JSON"),
    ('{"runs": [{"strategy": "x"}]}', "schema_version: missing"),
    ('{"runs": [], "probe": "vacuum", "schema_version": 1}', "tool: missing"),
    ("[" * 100_000 + "]" * 100_000, "no list of runs"),  # refused at its first byte, not once read
    ('{"runs": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
    ('{"runs": [{"workers": NaN}]}', "not JSON \\(lexical error: invalid char in json text, near '.*NaN"),
    ('{"runs": [{"workers": 1e999}]}', "out of range"),
])
def test_load_report_rejects_what_is_not_ours(tmp_path, text, message):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_report(path)


@pytest.mark.parametrize("field,value,message", [
    ("workers", "abc", 'runs\\[0\\].workers: expected integer, got "abc"'),
    ("workers", None, "runs\\[0\\].workers: expected integer, got null"),
    ("workers", True, "runs\\[0\\].workers: expected integer, got true"),
    ("throughput_jobs_per_s", "fast", 'runs\\[0\\].throughput_jobs_per_s: expected number, got "fast"'),
    ("double_claimed_jobs", "x", 'runs\\[0\\].double_claimed_jobs: expected integer, got "x"'),
    ("repetitions", [{"throughput_jobs_per_s": -1, "elapsed_s": 1, "jobs_done": 1, "double_claimed_jobs": 0,
                      "exactly_once": True}],
      "runs\\[0\\].repetitions\\[0\\].throughput_jobs_per_s: must be"),
])
def test_load_report_names_the_file_and_the_field(tmp_path, field, value, message):
    import json

    path = tmp_path / "r.json"
    path.write_text(json.dumps(report(run_object(**{field: value}))))
    with pytest.raises(UsageError, match=f"r.json: not a valid claimcheck report .*{message}"):
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
    from pg_claimcheck.contract.dialect import to_positional

    text, names = to_positional("UPDATE jobs SET w = %(worker)s WHERE id = %(id)s AND a = %(attempts)s "
                                "AND w2 = %(worker)s AND note LIKE 'x%%'")
    assert text == "UPDATE jobs SET w = $1 WHERE id = $2 AND a = $3 AND w2 = $1 AND note LIKE 'x%'"
    assert names == ("worker", "id", "attempts")


def test_an_integer_too_large_for_a_float_is_refused_naming_file_and_field(tmp_path):
    # Valid JSON: it ended in an OverflowError traceback and exit 1, the regression code.
    import json

    doc = report(run_object())
    doc["runs"][0]["repetitions"][0]["throughput_jobs_per_s"] = 10 ** 400
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r"big.json: .*runs\[0\].repetitions\[0\].throughput_jobs_per_s is a number "
                                         r"out of range \(401 digits\)"):
        load_report(path)


def test_two_runs_under_one_key_are_refused_not_half_judged(tmp_path):
    # The first of duplicate keys won: a second, violated run passed as "no regression" (exit 0).
    import json

    ok, violated = run_object("skip-locked", 8, 1000.0, True), run_object("skip-locked", 8, 1000.0, False)
    path = tmp_path / "new.json"
    path.write_text(json.dumps(report(ok, violated)))
    with pytest.raises(UsageError, match=r"new.json: runs\[0\] and runs\[1\] have the same strategy, mode, workers, "
                                         r"batch, planner condition and offered rate \(skip-locked · lease · 8 · 10 · as-seeded\)"):
        load_report(path)
    with pytest.raises(UsageError, match="the new report: runs\\[0\\] and runs\\[1\\]"):
        compare(BASE, report(ok, violated))


def test_a_report_of_copies_of_one_run_is_refused_at_its_second_copy_never_held_whole(tmp_path, monkeypatch):
    # 12,000 copies of one run took 89 s and 246 MB to refuse: the schema read every run first. Then they
    # were refused at the second, but only once the whole report was loaded: 120,000 copies took 488 MB.
    import json

    from pg_claimcheck.report import reader, validation

    path = tmp_path / "copies.json"
    path.write_text(json.dumps(report(*[run_object("skip-locked", 8, 1000.0, True)] * 200)))
    monkeypatch.setattr(validation, "run_errors", lambda run, index: pytest.fail("the schema read a run"))
    monkeypatch.setattr(reader.json, "loads", lambda text: pytest.fail("the report was loaded whole"))
    built = []
    monkeypatch.setattr(reader, "_built", lambda events, event, value, real=reader._built: built.append(1) or
                        real(events, event, value))
    with pytest.raises(UsageError, match=r"copies.json: runs\[0\] and runs\[1\] have the same strategy"):
        load_report(path)
    assert len(built) <= 2 + len(report()) - 1, "runs built past the second copy"


def test_a_truncated_report_is_refused_before_any_run_is_validated(tmp_path, monkeypatch):
    import json

    from pg_claimcheck.report import validation

    path = tmp_path / "cut.json"
    path.write_text(json.dumps(report(*[run_object("skip-locked", w, 1000.0, True) for w in range(1, 50)]))[:-10])
    monkeypatch.setattr(validation, "run_errors", lambda run, index: pytest.fail("the schema read a run"))
    with pytest.raises(UsageError, match=r"cut.json: not JSON \(parse error: premature EOF"):
        load_report(path)


def test_a_schema_fault_names_its_run_and_the_reports_own_faults_come_first(tmp_path):
    import json

    doc = report(*[run_object("skip-locked", w, 1000.0, True) for w in range(1, 6)])
    doc["runs"][3]["workers"] = "four"
    del doc["tool"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r'r.json: not a valid claimcheck report .*: tool: missing; '
                                         r'runs\[3\].workers: expected integer, got "four"'):
        load_report(path)


def test_a_report_of_more_runs_than_any_sweep_writes_is_refused(tmp_path, monkeypatch):
    # The keys of the runs read so far are what the reader keeps: their number is bounded too.
    import json

    from pg_claimcheck.report import reader

    monkeypatch.setattr(reader, "MAX_RUNS", 3)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(report(*[run_object("skip-locked", w, 1000.0, True) for w in range(1, 6)])))
    with pytest.raises(UsageError, match="many.json: not a claimcheck report: more than 3 runs"):
        load_report(path)
    path.write_text(json.dumps(report(*[run_object("skip-locked", w, 1000.0, True) for w in range(1, 4)])))
    assert len(load_report(path)["runs"]) == 3


def test_a_report_nested_just_within_json_loads_reach_is_refused_in_words(tmp_path):
    # A list json.loads takes but jsonschema's validation (and the repr() it words an error with)
    # recursed past Python's stack on: a RecursionError traceback, exit 1. The depth at which that
    # happens depends on the stack in use, so every depth up to past json.loads's limit is tried.
    path = tmp_path / "r.json"
    for depth in range(800, 1100, 2):
        path.write_text('{"runs": [' + "[" * depth + "]" * depth + "]}")
        with pytest.raises(UsageError, match="not a claimcheck report|not a valid claimcheck report"):
            load_report(path)


def test_pgbench_rate_script_enqueues_its_own_key_then_runs_one_worker_cycle():
    from pg_claimcheck.engine.pgbench import rate_script

    settings = RunSettings(workers=4, batch=1)
    script = rate_script(load_strategy("skip-locked"), settings, True, first_key=101)
    lines = script.splitlines()
    assert lines[:2] == ["\\set cc_n :cc_n + 1", "\\set cc_key 101 + :client_id + 4 * (:cc_n - 1)"]
    assert "VALUES (CAST(:cc_key AS bigint), jsonb_build_object('n', CAST(:cc_key AS bigint)))" in script
    assert script.endswith(build_script(load_strategy("skip-locked"), settings, True))


def test_pgbench_log_lines_give_latency_and_schedule_lag(tmp_path):
    from pg_claimcheck.engine.pgbench import _read_logs

    (tmp_path / "txn.1").write_text("0 1 3660 0 1796167133 727585 133\n1 1 failed 0 1796167133 730728 91\n")
    (tmp_path / "txn.1.1").write_text("1 2 305 0 1796167133 754360 97\n")
    assert sorted(_read_logs(list(tmp_path.iterdir()))) == [(305, 97), (3660, 133)]


def test_a_held_run_whose_power_fell_by_more_than_half_regresses():
    def powered(overlapping: int, ok: bool = True) -> dict:
        out = doc(("skip-locked", 8, 1000.0, ok))
        out["runs"][0]["power"] = {"claims": 100, "overlapping_claims": overlapping, "statement": "", "unseen": []}
        return out

    assert_valid_report(powered(40))
    fell = compare(powered(40), powered(19))
    assert fell.regressed and fell.diffs[0].status == "POWER FELL"
    assert not compare(powered(40), powered(20)).regressed
    assert not compare(doc(("skip-locked", 8, 1000.0, True)), powered(0)).regressed  # a base without figures
