"""`claimcheck idle` and `lib --idle` refuse bad input before anything starts: exit 2, one paragraph."""
import pytest

from pg_claimcheck.cli import main

NO_SERVER = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]


@pytest.mark.parametrize("argv, words", [
    (["idle", "--window", "0"], "--window must be"),
    (["idle", "--window", "nan"], "--window must be"),
    (["idle", "--suspend-after", "0.2"], "--suspend-after must be"),
    (["idle", "--wakeup", "sleep"], "choose from poll, notify, drain"),
    (["idle", "--wakeup", "poll,notify", "--poll-ms", "1,2,3"], "give one for all, or one each"),
    (["idle", "--poll-ms", "0"], "--poll-ms must be"),
    (["lib", "procrastinate", "--idle", "0"], "--idle must be"),
    (["idle", "--pooler", "pgbouncer"], "behind a pooler the server sees the pooler's connections"),
    (["lib", "procrastinate", "--idle", "5", "--rate", "10"], "does not combine with --rate"),
])
def test_bad_input_is_refused_in_one_line(capsys, argv, words):
    code = main([*argv, *NO_SERVER])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert words in err and "Traceback" not in err and "cannot connect" not in err
