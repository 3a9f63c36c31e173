"""The VACUUM (VERBOSE) reader, on notices captured from real servers (tests/unit/verbose/)."""
import json
from pathlib import Path

import pytest

from pg_claimcheck.probes._verbose import VacuumFigures, parse_vacuum_verbose
from pg_claimcheck.probes.vacuum import VerboseCapture

CAPTURED = sorted((Path(__file__).parent / "verbose").glob("pg*.json"))


def test_there_is_a_capture_for_each_supported_major():
    assert {p.stem for p in CAPTURED} >= {"pg15", "pg16", "pg18"}


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_held_claim_shows_dead_but_not_removable(path):
    doc = json.loads(path.read_text())
    assert parse_vacuum_verbose(doc["held"]) == VacuumFigures(removed=0, remain=410, dead_not_removable=200,
                                                               cutoff_age_xids=201)


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_after_release_they_are_removed(path):
    doc = json.loads(path.read_text())
    assert parse_vacuum_verbose(doc["released"]) == VacuumFigures(removed=201, remain=210, dead_not_removable=0,
                                                                   cutoff_age_xids=0)


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_the_toast_tables_figures_are_not_taken_for_the_tables(path):
    held = json.loads(path.read_text())["held"]
    toast_first = [m for m in held if "pg_toast" in m] + [m for m in held if "pg_toast" not in m]
    assert parse_vacuum_verbose(toast_first).dead_not_removable == 200
    assert parse_vacuum_verbose([m for m in held if "pg_toast" in m]) is None


def test_postgresql_14_tuples_line_with_oldest_xmin():
    # Format string of PostgreSQL 14's vacuumlazy.c (not captured: no 14 server here).
    messages = ['vacuuming "public.jobs"',
                'table "jobs": index scans: 0\npages: 0 removed, 6 remain, 6 skipped due to pins\n'
                'tuples: 3 removed, 410 remain, 200 are dead but not yet removable, oldest xmin: 728']
    assert parse_vacuum_verbose(messages) == VacuumFigures(3, 410, 200, None)


def test_postgresql_13_found_removable_with_detail():
    # PostgreSQL <= 14 manual VACUUM VERBOSE: primary "found ... removable" and a DETAIL line.
    messages = ['vacuuming "public.jobs"',
                'scanned index "jobs_pkey" to remove 7 row versions',
                '"jobs": found 7 removable, 410 nonremovable row versions in 6 out of 6 pages\n'
                '200 dead row versions cannot be removed yet, oldest xmin: 728\nThere were 0 unused item identifiers.']
    assert parse_vacuum_verbose(messages) == VacuumFigures(7, 410, 200, None)


def test_other_tables_and_noise_give_none():
    assert parse_vacuum_verbose([]) is None
    assert parse_vacuum_verbose(['finished vacuuming "postgres.s.jobs_archive": index scans: 0\n'
                                 'tuples: 1 removed, 2 remain, 3 are dead but not yet removable']) is None


def test_capture_joins_primary_and_detail():
    class Diag:
        message_primary, message_detail = '"jobs": found 1 removable', "2 dead row versions cannot be removed yet"

    capture = VerboseCapture()
    capture(Diag())
    assert capture.messages == ['"jobs": found 1 removable\n2 dead row versions cannot be removed yet']
