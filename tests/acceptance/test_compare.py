"""`claimcheck compare` as CI uses it: exit codes on crafted baselines."""
import json

import pytest

RUN = dict(strategy="skip-locked", mode="lease", workers=8, batch=10, throughput_jobs_per_s=1000.0,
           exactly_once=True, double_claimed_jobs=0)


def report(cli, name, **changes):
    path = cli.scratch / name
    path.write_text(json.dumps({"tool": {"name": "claimcheck"}, "runs": [{**RUN, **changes}]}))
    return str(path)


@pytest.mark.parametrize("changes,extra,code,shown", [
    ({}, [], 0, "no regression"),
    ({"throughput_jobs_per_s": 850.0}, [], 0, "-15.0%"),
    ({"throughput_jobs_per_s": 700.0}, [], 1, "SLOWER"),
    ({"throughput_jobs_per_s": 700.0}, ["--max-drop", "35%"], 0, "no regression"),
    ({"exactly_once": False, "double_claimed_jobs": 12}, [], 1, "VERDICT REGRESSED"),
])
def test_compare_exit_codes(cli, changes, extra, code, shown):
    result = cli("compare", report(cli, "base.json"), report(cli, "new.json", **changes), *extra)
    assert result.code == code, result.stdout + result.stderr
    assert shown in result.stdout


@pytest.mark.parametrize("name,text,message", [
    ("missing.json", None, "no such file"),
    ("notes.json", "just words", "not JSON"),
    ("other.json", '{"rows": []}', "not a claimcheck report"),
])
def test_compare_bad_input_exits_2(cli, name, text, message):
    path = cli.scratch / name
    if text is not None:
        path.write_text(text)
    result = cli("compare", report(cli, "base.json"), str(path))
    assert result.code == 2
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
