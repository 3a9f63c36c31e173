"""--json PATH: a destination that cannot be written is said before the run, and a report that could
not be written after it is kept elsewhere, its path said (issue 25)."""
import json
import re
from pathlib import Path

import pytest

from pg_claimcheck.commands._options import check_writable
from pg_claimcheck.errors import ClaimcheckError, UsageError
from pg_claimcheck.report.render import write_json

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


def test_a_disk_that_fills_up_mid_write_leaves_no_empty_file_at_the_destination(tmp_path):
    # A full disk left a 0-byte file at --json's path (the report itself was kept elsewhere). The file
    # size limit makes the write fail as a full disk does, after the file was opened.
    import subprocess
    import sys
    target = tmp_path / "r.json"
    script = ("import resource, signal, sys; from pathlib import Path; "
              "from pg_claimcheck.report.render import write_whole; "
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); "
              "write_whole(Path(sys.argv[1]), 'x' * 100_000)")
    done = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True)
    assert "File too large" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []  # no empty file at the path, no temporary file beside it


def test_a_read_only_working_directory_is_refused_before_bench_runs(capsys, monkeypatch):
    # bench ran every strategy, then failed with a raw "[Errno 30] Read-only file system: 'reports'".
    from pg_claimcheck.cli import main
    monkeypatch.chdir("/proc")  # its permission bits let root in; no directory can be made there
    code = main(["bench", "--strategies", "skip-locked", "--dsn", "postgresql://nobody@127.0.0.1:1/none"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "the reports go to reports/ under the current directory (/proc)" in err, err
    assert "cannot connect" not in err  # refused before anything ran
