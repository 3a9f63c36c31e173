"""Input the contract does not allow is refused by the CLI before anything starts: exit 2, one
paragraph, no server contacted (the DSN given points at a closed port). In process: no server."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pg_claimcheck.cli import main

NO_SERVER = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]
SCENARIOS = Path(__file__).parents[2] / "scenarios"


def refused(capsys, *argv: str) -> str:
    code = main([*argv, *NO_SERVER])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert "cannot connect" not in err and "Traceback" not in err, err
    return err


def test_bench_refuses_two_strategies_of_one_name(capsys, tmp_path):
    # Two rows both named `claim`, the safe one shown with the unsafe one's plan reasons.
    for sub, builtin in (("a", "skip_locked.sql"), ("b", "naive_subquery.sql")):
        (tmp_path / sub).mkdir()
        shutil.copy(SCENARIOS / builtin, tmp_path / sub / "claim.sql")
    err = refused(capsys, "bench", "--strategies", f"{tmp_path}/a/claim.sql,{tmp_path}/b/claim.sql")
    assert f"{tmp_path}/a/claim.sql and {tmp_path}/b/claim.sql are both named 'claim'" in err


def test_bench_refuses_a_strategy_given_twice(capsys):
    assert "skip-locked is given twice" in refused(capsys, "bench", "--strategies", "skip-locked,skip-locked")


@pytest.mark.parametrize("option", ["--duration nan", "--duration inf", "--poll-ms nan", "--work-ms nan",
                                    "--reap-every nan", "--lease-seconds nan", "--backoff-unit nan",
                                    "--backoff-cap inf", "--fail-rate nan", "--jobs 99999999999"])
@pytest.mark.parametrize("verb", [["check", "skip-locked"], ["bench", "--strategies", "skip-locked"],
                                  ["faults"]])
def test_non_finite_and_unbounded_options_are_refused_before_anything_starts(capsys, verb, option):
    # Accepted before: runs of 3-30 s ending "stalled" with exit 0, server errors, or a seed of 1e11 rows.
    name, value = option.split()
    err = refused(capsys, *verb, name, value)
    assert f"claimcheck: error: {name}" in err, err


@pytest.mark.parametrize("option", ["--workers 2,4", "--batch 1,10", "--mode lease,lock"])
def test_check_judges_one_setting_and_its_help_offers_no_comma_list(capsys, option):
    # `check --help` offered comma lists, which only bench and faults sweep.
    with pytest.raises(SystemExit) as exited:
        main(["check", "skip-locked", *option.split(), *NO_SERVER])
    assert exited.value.code == 2
    assert "check judges one setting (bench sweeps comma lists)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "comma" not in capsys.readouterr().out.split("lifecycle")[0]


def test_check_refuses_producers_without_a_rate(capsys):
    assert "--producers needs --rate" in refused(capsys, "check", "skip-locked", "--producers", "2")


@pytest.mark.parametrize("argv, words", [
    (["--wakeup", "notify"], "--wakeup notify needs --rate"),
    (["--rate", "10", "--duration", "1", "--wakeup", "notify", "--pooler", "pgbouncer"],
     "--wakeup notify needs workers that can LISTEN"),
    (["--rate", "10", "--duration", "1", "--wakeup", "notify", str(Path(__file__).parents[1] / "plans" / "own_tables_in_subquery.sql")],
     "--wakeup notify is for claimcheck's jobs table"),
])
def test_check_refuses_notify_where_it_does_not_apply(capsys, argv, words):
    files = [a for a in argv if a.endswith(".sql")]
    options = [a for a in argv if not a.endswith(".sql")]
    assert words in refused(capsys, "check", *(files or ["skip-locked"]), *options)


@pytest.mark.parametrize("argv, words", [
    (["lib", "procrastinate", "--rate", "10", "--duration", "1", "--pgbench"], "does not combine with --pgbench"),
    (["lib", "procrastinate", "--rate", "10", "--duration", "1", "--faults"], "does not combine"),
    (["lib", "procrastinate", "--rate", "10"], "--rate needs --duration"),
])
def test_lib_refuses_a_rate_where_it_does_not_apply(capsys, argv, words):
    assert words in refused(capsys, *argv)


@pytest.mark.parametrize("argv,words", [
    # Each was accepted: a run with no pooler (exit 0), an SLO silently ignored, `100,200` swept.
    (["check", "skip-locked", "--pooler", ""], "--pooler '': the pooler claimcheck starts is pgbouncer"),
    (["bench", "--strategies", "skip-locked", "--latency-slo", "50"], "--latency-slo needs --rate"),
    (["bench", "--strategies", "skip-locked", "--rate", "100,,200"], "got '100,,200' (an empty item"),
    (["bench", "--strategies", "skip-locked", "--workers", "4,"], "got '4,' (an empty item"),
])
def test_options_that_mean_nothing_are_refused_like_their_neighbours(capsys, argv, words):
    try:
        err = refused(capsys, *argv)
    except SystemExit as exited:  # refused by the option's own parser, as argparse does
        assert exited.code == 2
        err = " ".join(capsys.readouterr().err.split())
    assert words in err, err


@pytest.mark.parametrize("argv,message", [
    (["--budget", "10", "--jobs", "100"], "--budget sizes the check by time; --jobs asks for a fixed size"),
    (["--budget", "10", "--drain"], "--drain asks for a fixed size"),
    (["--budget", "1"], "--budget must be between 2 and 86,400 seconds, got 1.0"),
    (["--budget", "nan"], "--budget must be between 2 and 86,400 seconds, got nan"),
])
def test_check_refuses_a_budget_it_cannot_keep(capsys, argv, message):
    assert message in refused(capsys, "check", "skip-locked", *argv)


OWN_TABLES = Path(__file__).parents[1] / "plans" / "own_tables_in_subquery.sql"


@pytest.mark.parametrize("verb", [["check", str(OWN_TABLES), "--plans", "none"], ["bench", "--strategies", str(OWN_TABLES)]])
def test_rate_on_own_tables_without_enqueue_is_refused_before_any_server(capsys, verb):
    assert "--rate needs its `enqueue` section" in refused(capsys, *verb, "--rate", "10", "--duration", "1")


def test_the_help_lists_the_built_in_strategies(capsys):
    from pg_claimcheck.scenarios import CATALOG

    for verb in ("check", "bench"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        text = " ".join(capsys.readouterr().out.replace("-\n", "-").split())
        assert all(name in text.replace("- ", "-") for name in CATALOG), (verb, text)


def test_bench_and_lib_agree_on_their_defaults_and_a_rate_run_starts_nearly_empty():
    from pg_claimcheck.cli import build_parser
    from pg_claimcheck.commands import bench
    from pg_claimcheck.libs.runner import LIB_JOBS, LIB_WORK_MS
    from pg_claimcheck.settings import RATE_BACKLOG_JOBS

    b = build_parser().parse_args(["bench"])
    assert (b.workers, bench.BENCH_JOBS, b.work_ms) == ([8], LIB_JOBS, LIB_WORK_MS) == ([8], 5_000, "1")
    lib = build_parser().parse_args(["lib", "procrastinate"])
    assert lib.workers == [8] and lib.jobs is None and lib.default_jobs == LIB_JOBS
    assert RATE_BACKLOG_JOBS <= 100  # a backlog the workers drain in well under a second, not 20,000 jobs
