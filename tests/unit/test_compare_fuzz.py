"""Fuzzing `claimcheck compare` through its real entry point: whatever the two files hold, it ends with
0 (no regression), 1 (a regression, in two valid reports) or 2 (one paragraph on stderr), never a
traceback. Also: how report.schema words each kind of schema error `compare` prints (required, type,
enum, const, minimum), case by case.

Figures (examples run) are reported at the end of `make test` ("claimcheck figures").
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_counts import count_example
from pg_claimcheck.cli import main
from pg_claimcheck.report import validation as report_schema
from sample_reports import report, run_object, schema_accepts

EXAMPLES = 300
RELATED_EXAMPLES = 100  # each renders a full comparison table: the slowest examples of the three
json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**20) | st.floats(allow_nan=True) | st.text(max_size=12)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
names = st.sampled_from(["skip-locked", "for-update", "[bold]x[/]", "[/]", "é ∑", ""]) | st.text(max_size=10)


@st.composite
def valid_reports(draw) -> dict:
    runs = [run_object(draw(names), draw(st.integers(1, 4)), ok=draw(st.booleans()),
                       mode=draw(st.sampled_from(["lease", "lock"])),
                       rates=draw(st.lists(st.floats(0, 5000), min_size=1, max_size=6)))
            for _ in range(draw(st.integers(0, 3)))]
    # One run per key: compare refuses a report with two (docs/contracts.md, section 4).
    runs = list({(r["strategy"], r["mode"], r["workers"], r["batch"]): r for r in reversed(runs)}.values())[::-1]
    return report(*runs, version=draw(st.sampled_from(["16.4", "17.2"])))


@st.composite
def mutated_reports(draw) -> dict:
    """A valid report with one to three values replaced, deleted or added somewhere inside."""
    doc = copy.deepcopy(draw(valid_reports()))
    for _ in range(draw(st.integers(1, 3))):
        node = doc
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            if not isinstance(node[key], (dict, list)) or not node[key]:
                break
            node = node[key]
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            if draw(st.booleans()):
                node[key] = draw(json_values)
            else:
                del node[key]
        elif isinstance(node, list) and node:
            node[draw(st.integers(0, len(node) - 1))] = draw(json_values)
    return doc


def as_text(doc) -> str:
    return json.dumps(doc, allow_nan=True)  # Python writes NaN; compare must refuse it cleanly


file_texts = (valid_reports().map(as_text) | mutated_reports().map(as_text) | json_values.map(as_text)
              | st.text(max_size=40) | st.integers(1, 50_000).map(lambda n: "[" * n + "]" * n)
              | st.integers(1, 50_000).map(lambda n: '{"runs": [' + '{"a":' * n + "1" + "}" * n + "]}"))
options = st.lists(st.sampled_from(["--max-drop=20", "--max-drop=nan", "--max-drop=-1", "--max-drop=0",
                                    "--max-drop=100%", "--alpha=0.05", "--alpha=1", "--alpha=inf"]), max_size=2)


def _count(request, name: str, code) -> None:
    """Examples run by exit code, shown once at the end of the session (not asserted)."""
    count_example(request, name + ": examples by exit code", f"exit {code}")


@st.composite
def related_pairs(draw) -> tuple[dict, dict]:
    """A valid base and a new report of the same runs, each slower or faster and maybe violated."""
    base = draw(valid_reports().filter(lambda d: d["runs"]))
    new = copy.deepcopy(base)
    for run in new["runs"]:
        factor = draw(st.sampled_from([0.3, 0.7, 0.79, 0.81, 1.0, 1.5]))
        rates = [r["throughput_jobs_per_s"] * factor for r in run["repetitions"]]
        ok = run["exactly_once"] and draw(st.booleans())
        run.update(run_object(run["strategy"], run["workers"], ok=ok, mode=run["mode"], rates=rates))
    return base, new


def _regressed(base: dict, new: dict, max_drop: float = 20.0) -> bool:
    """Could compare call this pair a regression: a verdict lost, or some median fallen past the threshold?"""
    from pg_claimcheck.verdict.stats import median

    old = {(r["strategy"], r["mode"], r["workers"], r["batch"]): r for r in reversed(base["runs"])}
    for run in new["runs"]:
        was = old.get((run["strategy"], run["mode"], run["workers"], run["batch"]))
        if was is None:
            continue
        before = median([r["throughput_jobs_per_s"] for r in was["repetitions"]])
        after = median([r["throughput_jobs_per_s"] for r in run["repetitions"]])
        if (was["exactly_once"] and not run["exactly_once"]) or (before and (1 - after / before) * 100 > max_drop):
            return True
    return False


@settings(max_examples=RELATED_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(pair=related_pairs())
def test_related_reports_exit_0_or_1_and_1_only_for_a_real_change(pair, request):
    base, new = pair
    code, out, err, _ = run_compare(as_text(base), as_text(new), [])
    _count(request, "compare fuzz (related valid reports)", code)
    assert code in (0, 1), (code, out, err)
    assert code == 0 or _regressed(base, new), out


def run_compare(base_text: str, new_text: str, extra: list[str]) -> tuple[int, str, str, list]:
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as scratch:
        paths = [Path(scratch) / "base.json", Path(scratch) / "new.json"]
        for path, text in zip(paths, (base_text, new_text)):
            path.write_text(text)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["compare", *map(str, paths), *extra])
            except SystemExit as exc:  # argparse refusing an option
                code = exc.code
    return code, out.getvalue(), err.getvalue(), paths


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(base=file_texts, new=file_texts, extra=options)
def test_compare_ends_with_a_documented_exit_code(base, new, extra, request):
    code, out, err, _ = run_compare(base, new, extra)
    _count(request, "compare fuzz (any two files)", code)
    assert code in (0, 1, 2), (code, out, err)
    assert "Traceback" not in out + err
    if code == 2:
        assert err.startswith(("claimcheck: error:", "usage:")), err
    else:
        both_valid = all(schema_accepts(json.loads(t)) for t in (base, new))
        assert both_valid, "compare judged a report the published schema refuses"
        assert ("regression(s)" in out) is (code == 1) and ("no regression" in out) is (code == 0)


def _worded(change) -> list[str]:
    doc = report(run_object("mine", 4, 100.0, True))
    change(doc)
    return list(report_schema.errors(doc))


@pytest.mark.parametrize("change,worded", [
    (lambda d: None, []),
    (lambda d: d["runs"][0].pop("workers"), ["runs[0].workers: missing"]),  # required: the key is the field
    (lambda d: d.pop("tool"), ["tool: missing"]),
    (lambda d: d["runs"][0].update(workers="abc"), ['runs[0].workers: expected integer, got "abc"']),
    (lambda d: d["runs"][0].update(workers="x" * 60), ['runs[0].workers: expected integer, got "' + "x" * 36 + "..."]),
    (lambda d: d["runs"][0].update(workers=[[1]]), ["runs[0].workers: expected integer, got an array"]),
    (lambda d: d.update(schema_version=6), ["schema_version: expected one of 1, 2, 3, 4, 5, got 6"]),
    (lambda d: d["runs"][0].update(mode="fast"), ['runs[0].mode: expected one of "lease", "lock", got "fast"']),
    (lambda d: d["tool"].update(name="other"), ['tool.name: expected "claimcheck", got "other"']),
    (lambda d: d["runs"][0].update(seed_seconds=-1), ["runs[0].seed_seconds: must be at least 0, got -1"]),
], ids=["valid", "required", "required-top", "type", "type-long", "type-array", "enum", "enum-text", "const",
        "minimum"])
def test_the_schema_errors_are_worded_as_compare_names_a_field(change, worded):
    assert _worded(change) == worded


def test_identical_valid_reports_never_regress():
    text = as_text(report(run_object(rates=[900.0, 1000.0, 1100.0, 1050.0, 950.0])))
    assert run_compare(text, text, [])[0] == 0
