"""--json PATH: a destination that cannot be written is said before the run, and a report that could
not be written after it is kept elsewhere, its path said (issue 25)."""
import json
import re
from pathlib import Path

import pytest

from claimcheck.commands._options import check_writable
from claimcheck.errors import ClaimcheckError, UsageError
from claimcheck.report.render import write_json

UNWRITABLE = Path("/proc/r.json")  # /proc's permission bits let root write; creating a file there fails


def test_a_destination_the_permission_bits_allow_but_the_filesystem_refuses_is_refused_before_the_run():
    with pytest.raises(UsageError, match=r"--json /proc/r.json: cannot be written \(.*\); name a file"):
        check_writable(UNWRITABLE)


def test_a_writable_destination_is_left_as_it_was(tmp_path):
    fresh, existing = tmp_path / "new.json", tmp_path / "old.json"
    existing.write_text("kept")
    check_writable(fresh)
    check_writable(existing)
    assert not fresh.exists() and existing.read_text() == "kept"


def test_a_report_that_cannot_be_written_after_the_run_is_kept_and_its_path_said():
    with pytest.raises(ClaimcheckError, match=r"could not write the JSON report to /proc/r.json .* kept at (\S+)") as err:
        write_json({"runs": [], "verdict": "kept"}, UNWRITABLE, "check")
    kept = Path(re.search(r"kept at (\S+)$", str(err.value)).group(1))
    try:
        assert json.loads(kept.read_text()) == {"runs": [], "verdict": "kept"}
    finally:
        kept.unlink()
