"""Reading a JSON report back (`compare`'s input): checked as it streams, refused at its first fault.

A report is read as a stream of JSON events (the `ijson` package, whose C parser reads a file in
chunks), one top-level field and one run at a time, each built, checked and let go. A first pass reads
the JSON and checks what is cheap: numbers a float cannot hold, two runs under one key (compare could
not tell which to match). A second checks each run against the published schema
(pg_claimcheck.report.validation, which has no rule across runs), at milliseconds a run. A malformed or
duplicated report is so refused in time linear in what was read and in memory bounded by one run and
the keys of the runs before it (at most MAX_RUNS): copies of one run at the second copy, a truncated
report before any run is validated. Only a report that passed is then loaded whole, for the comparison.
Loaded whole first, a report of 12,000 copies of one run (13 MB) took 90 MB to refuse, and 120,000
copies 488 MB: memory grew with the file.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import ijson
from ijson.common import ObjectBuilder

from pg_claimcheck.errors import UsageError, open_input
from pg_claimcheck.report import validation as report_schema
from pg_claimcheck.verdict.result import run_condition

ERRORS_SHOWN = 3
MAX_RUNS = 10_000
"""Runs one report may hold. A bench sweep writes tens to hundreds; the keys of the runs read so far are
what the check of distinct runs keeps, and this bounds them."""
MAX_FLOAT = int(sys.float_info.max)
NOT_OURS = "expected a claimcheck report written by `claimcheck bench` or `check --json`"
_OPENS, _CLOSES = frozenset(("start_map", "start_array")), frozenset(("end_map", "end_array"))

RunKey = tuple[str, str, int, int, str, "float | None"]


def run_key(run: dict) -> RunKey:
    """(strategy, mode, workers, batch, planner condition, offered rate): a run without conditions (schema
    version 1, `--plans none`, bench) is the as-seeded run of a check under conditions; a run without a
    producer has no offered rate (None), and a `bench --rate` sweep has one run per rate."""
    return (run["strategy"], run["mode"], int(run["workers"]), int(run["batch"]), run_condition(run),
            run.get("offered_rate_per_s"))


def shown_key(key: RunKey) -> str:
    return " · ".join(str(x) for x in key[:5]) + ("" if key[5] is None else f" · {key[5]:g} jobs/s")


class DistinctRuns:
    """The runs of one report, told apart by key as they come. Two runs under one key cannot both be
    matched: judging the first would let a violation in the second pass as "no regression"."""

    def __init__(self, where: Path | str) -> None:
        self.where, self.seen = where, dict[RunKey, int]()

    def see(self, run: Any, index: int) -> list[str]:
        """Refuse run `index` if an earlier one has its key; nothing to word otherwise (a run whose key cannot be
        read is left to the schema to word): a `RunCheck`."""
        try:
            key = run_key(run)
            hash(key)
        except (KeyError, TypeError, ValueError, AttributeError):
            return []
        if key in self.seen:
            raise UsageError(f"{self.where}: runs[{self.seen[key]}] and runs[{index}] have the same strategy, mode, "
                             f"workers, batch, planner condition and offered rate ({shown_key(key)}), so compare cannot "
                             "tell which to match; compare reports with one run per strategy and setting (strategies "
                             "named apart)")
        self.seen[key] = index
        return []


def check_distinct_runs(doc: dict, where: Path | str) -> None:
    """`DistinctRuns` over a report held whole (one handed to pg_claimcheck.report.compare.compare)."""
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise UsageError(f"{where}: not a claimcheck report (no list of runs)")
    distinct = DistinctRuns(where)
    for index, run in enumerate(runs):
        distinct.see(run, index)


def load_report(path: Path) -> dict:
    """A claimcheck run report, or a UsageError that names the file and what is wrong."""
    with open_input(path, UsageError) as stream:
        try:
            _scan(stream, path, DistinctRuns(path).see)
            stream.seek(0)
            top, bad_run = _scan(stream, path, lambda run, index: list(report_schema.run_errors(run, index)))
        except ijson.JSONError as exc:
            raise UsageError(f"{path}: not JSON ({_json_fault(exc)}); {NOT_OURS}") from None
        except RecursionError:  # jsonschema and the magnitudes recurse: a value nested past Python's stack
            raise UsageError(f"{path}: not a claimcheck report (nested too deeply)") from None
        # Shallowest first, as the schema words a whole report: what makes it no report of ours comes first.
        problems = [*report_schema.errors(top), *bad_run][:ERRORS_SHOWN + 1]
        if problems:
            more = " (and more)" if len(problems) > ERRORS_SHOWN else ""
            raise UsageError(f"{path}: not a valid claimcheck report (schema version {report_schema.SCHEMA_VERSION}, "
                             f"docs/contracts.md section 3): {'; '.join(problems[:ERRORS_SHOWN])}{more}")
        if "runs" not in top:
            raise UsageError(f"{path}: a `{top['probe']}` probe report has no runs to compare; compare reads the "
                             "reports of `claimcheck bench` and `check --json`")
        stream.seek(0)
        return json.loads(stream.read())  # what passed is JSON the standard parser reads the same


RunCheck = Callable[[Any, int], list[str]]
"""A check of run `index`: it raises what ends the reading at once, and returns what the schema would word."""


def _scan(stream: BinaryIO, path: Path, check_run: RunCheck) -> tuple[dict[str, Any], list[str]]:
    """One pass over the report: each top-level field and each run built as it completes, checked, and let go.
    The report's fields but its runs (an empty list), and the problems of the first run `check_run` found any in,
    after which the rest of the runs are only parsed."""
    # basic_parse: events without their path (a prefix string per event, which nesting 100,000 deep made
    # quadratic: 22 GB for a 200 KB file); each value is read whole, so where it is needs no path.
    events = ijson.basic_parse(stream)
    event, _ = next(events)
    if event != "start_map":
        raise UsageError(f"{path}: not a claimcheck report (no list of runs); {NOT_OURS}")
    top: dict[str, Any] = {}
    bad_run: list[str] = []
    for event, key in events:  # a key of the report, or its end: each value is read whole
        if event == "end_map":
            break
        event, value = next(events)
        if key == "runs" and event == "start_array":
            top["runs"] = []
            bad_run = _scan_runs(events, path, check_run)
        else:
            top[key] = _built(events, event, value)
            _check_magnitudes(top[key], path, key)
    for _ in events:  # the parser refuses anything after the document
        pass
    if "runs" not in top and "probe" not in top:
        raise UsageError(f"{path}: not a claimcheck report (no list of runs); {NOT_OURS}")
    return top, bad_run


def _scan_runs(events: Iterator[tuple[str, Any]], path: Path, check_run: RunCheck) -> list[str]:
    """The runs array's items, each built, checked and let go; the problems of the first with any."""
    bad: list[str] = []
    index = 0
    for event, value in events:  # a run's first event, or the array's end: each run is read whole
        if event == "end_array":
            break
        if bad:
            _skip(events, event)
            continue
        if index >= MAX_RUNS:
            raise UsageError(f"{path}: not a claimcheck report: more than {MAX_RUNS:,} runs (a bench sweep writes "
                             "hundreds at most)")
        run = _built(events, event, value)
        _check_magnitudes(run, path, f"runs[{index}]")
        bad = check_run(run, index)
        index += 1
    return bad


def _built(events: Iterator[tuple[str, Any]], event: str, value: Any) -> Any:
    """The value that starts with `event`, built from the events up to its end. A JSON number with a fraction
    or an exponent is a float, as the standard parser reads it (ijson gives a Decimal)."""
    builder = ObjectBuilder()
    depth = 0
    while True:
        builder.event(event, float(value) if type(value) is Decimal else value)
        depth += (event in _OPENS) - (event in _CLOSES)
        if not depth:
            return builder.value
        event, value = next(events)


def _skip(events: Iterator[tuple[str, Any]], event: str) -> None:
    """Parse past the value that starts with `event`, building nothing."""
    depth = int(event in _OPENS)
    while depth:
        event, _ = next(events)
        depth += (event in _OPENS) - (event in _CLOSES)


def _check_magnitudes(value: Any, path: Path, where: str) -> None:
    """A number a float cannot hold (JSON allows `1e999` and `10**400`) is out of range: the statistics work in
    floats, and it would end in an OverflowError."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{path}: not a claimcheck report: {where} is a number out of range")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FLOAT:
        raise UsageError(f"{path}: not a claimcheck report: {where} is a number out of range "
                         f"({len(str(abs(value)))} digits)")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _check_magnitudes(item, path, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}")


def _json_fault(exc: Exception) -> str:
    """The parser's fault in one line, with the text where it is: its message has the text on a line of its own
    and a pointer under it."""
    lines = str(exc).splitlines()
    near = lines[1].strip() if len(lines) > 1 else ""
    return lines[0].rstrip(".") + (f", near {near!r}" if near else "") if lines else type(exc).__name__
