"""`claimcheck compare` as CI uses it: exit codes on crafted baselines."""
import json

import pytest

from sample_reports import report as full_report
from sample_reports import run_object


def report(cli, name, **changes):
    path = cli.scratch / name
    path.write_text(json.dumps(full_report(run_object(**changes))))
    return str(path)


@pytest.mark.parametrize("changes,extra,code,shown", [
    ({}, [], 0, "no regression"),
    ({"jobs_per_s": 850.0}, [], 0, "-15.0%"),
    ({"jobs_per_s": 700.0}, [], 1, "SLOWER"),
    ({"jobs_per_s": 700.0}, ["--max-drop", "35%"], 0, "no regression"),
    ({"exactly_once": False, "double_claimed_jobs": 12}, [], 1, "VERDICT REGRESSED"),
    ({"rates": [700.0, 1400.0, 650.0, 1300.0, 720.0]}, [], 0, "within noise"),
    ({"rates": [500.0, 510.0, 490.0, 505.0, 495.0]}, [], 1, "SLOWER"),
])
def test_compare_exit_codes(cli, changes, extra, code, shown):
    base = cli.scratch / "base.json"
    base.write_text(json.dumps(full_report(run_object(rates=[1000.0, 1010.0, 990.0, 1005.0, 995.0]
                                                      if "rates" in changes else None))))
    result = cli("compare", str(base), report(cli, "new.json", **changes), *extra)
    assert result.code == code, result.stdout + result.stderr
    assert shown in result.stdout


@pytest.mark.parametrize("name,text,message", [
    ("missing.json", None, "no such file"),
    ("notes.json", "just words", "not JSON"),
    ("other.json", '{"rows": []}', "not a claimcheck report"),
    ("abc.json", json.dumps(full_report(run_object(workers="abc"))), 'abc.json: not a valid claimcheck report'),
    ("none.json", json.dumps(full_report()), "unusable comparison: the new report has no runs"),
    ("others.json", json.dumps(full_report(run_object("for-update"))), "unusable comparison: no run"),
])
def test_compare_bad_input_exits_2(cli, name, text, message):
    path = cli.scratch / name
    if text is not None:
        path.write_text(text)
    result = cli("compare", report(cli, "base.json"), str(path))
    assert result.code == 2, result.stdout + result.stderr
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "120%", "fast"])
def test_compare_refuses_a_max_drop_that_is_not_a_percentage(cli, value):
    result = cli("compare", report(cli, "base.json"), report(cli, "new.json"), f"--max-drop={value}")
    assert result.code == 2 and "expected a percentage from 0 to 100" in result.stderr
